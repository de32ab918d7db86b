# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""A 500 that every backend repeats (NeMo RL's policy server refusing the sampling parameters) is
this request's error: the pool stops after two backends instead of spreading it to every rank."""

from __future__ import annotations

import pytest
from test_pool import BODY, config

from nemo_gym_prorl.llm.errors import BackendRejectedError
from nemo_gym_prorl.llm.pool import LLMBackendPool
from nemo_gym_prorl.llm.server_errors import is_request_refusal

# The assertion text of nemo_rl/models/generation/vllm/vllm_worker_async.py at 7ea279a.
NEMO_RL_MISMATCH = (
    "request sampling (temperature=0.6, top_p=0.95) matches neither the train sampling params "
    "(temperature=1.0, top_p=1.0) nor the validation sampling params (val_temperature=1.0, val_top_p=1.0)"
)


def test_nemo_rl_sampling_assertions_are_request_refusals() -> None:
    assert is_request_refusal(500, NEMO_RL_MISMATCH)
    assert is_request_refusal(500, "Top k sampling parameter must be unset, empty, or -1. Got `20`")
    assert not is_request_refusal(500, '{"error": {"message": "engine dead"}}')
    assert not is_request_refusal(400, NEMO_RL_MISMATCH)


async def test_a_500_repeated_by_a_second_backend_is_the_requests_error(fake_llm) -> None:  # type: ignore[no-untyped-def]
    first, second, third = (
        await fake_llm(always="500"),
        await fake_llm(always="500"),
        await fake_llm(always="500"),
    )
    async with LLMBackendPool(config(first.url, second.url, third.url, max_attempts=5)) as pool:
        with pytest.raises(BackendRejectedError, match="from 2 backend"):
            await pool.post_json("/v1/completions", BODY)
        asked = sum(len(b.generation_requests()) for b in (first, second, third))
        assert asked == 2  # the third rank never saw it
