# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The keys NeMo Gym 0.7's rollout collection reads in an environment server's answer, in one
place: Gym's own where Gym makes them public, restated here where Gym keeps them private.

Public in Gym, imported (`nemo_gym.rollout_collection`): `NG_FAILURE_CLASS_KEY`,
`NG_TERMINAL_KEY`, `ENVIRONMENT_SERVER_FAILURE_CLASS`, `NG_TRAJECTORY_KEY`, `NG_PERF_KEY`.

Private in Gym 0.7, restated here and nowhere else (a test holds each to Gym's own):

- `is_collector_key` is `rollout_collection._is_collector_key`: the keys an environment server's
  result must not carry, because collection writes them itself;
- `MODEL_CALL_CAPTURE_KEY` ("ng_model_call_capture") is a literal in `rollout_collection` and
  `base_responses_api_model`, with no constant;
- `FAILURE_MESSAGE_KEY` and `FAILURE_STAGE_KEY` ("_ng_failure_message", "_ng_failure_stage") are
  literals in `rollout_collection._episode_record` and in `single_agent_turn_legacy`'s flat
  answer, with no constant.
"""

from __future__ import annotations

from nemo_gym.rollout_collection import (
    ENVIRONMENT_SERVER_FAILURE_CLASS,
    NG_FAILURE_CLASS_KEY,
    NG_PERF_KEY,
    NG_TERMINAL_KEY,
    NG_TRAJECTORY_KEY,
)

__all__ = [
    "ENVIRONMENT_SERVER_FAILURE_CLASS",
    "FAILURE_MESSAGE_KEY",
    "FAILURE_STAGE_KEY",
    "MODEL_CALL_CAPTURE_KEY",
    "NG_FAILURE_CLASS_KEY",
    "NG_TERMINAL_KEY",
    "is_collector_key",
]

MODEL_CALL_CAPTURE_KEY = "ng_model_call_capture"
FAILURE_MESSAGE_KEY = "_ng_failure_message"
FAILURE_STAGE_KEY = "_ng_failure_stage"

# Every key Gym prefixes `_ng_` is its own (routing, failure, identity), and these three records
# it builds from what the agent observed.
_COLLECTOR_RECORDS = frozenset({NG_TRAJECTORY_KEY, MODEL_CALL_CAPTURE_KEY, NG_PERF_KEY})


def is_collector_key(key: str) -> bool:
    """A key rollout collection writes itself, which an environment server's result must not use."""
    return key.startswith("_ng_") or key in _COLLECTOR_RECORDS
