# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The service's reward as a TRL reward function.

The service already scored every rollout (its evaluator ran in the sandbox); this function
only hands that reward to TRL. A masked rollout (failed, cancelled, infrastructure failure)
gets None, not 0.0: TRL 1.16 turns None into NaN, and a completion that every reward function
scored NaN is "unscorable": it is left out of its group's mean and standard deviation and its
advantage is forced to 0 (`GRPOTrainer._generate_and_score_completions`). A 0.0 would instead
be counted as a real failure of the policy and pull the group's baseline down. The masked
sample's `env_mask` is all 0 as well (`fields.py`), so it adds no token to the loss either.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


class MissingServiceFieldsError(ValueError):
    """The reward function ran without the fields the service `rollout_func` adds."""


def service_reward(
    prompts: Sequence[Any],
    completions: Sequence[Any],
    reward: Sequence[float | None] | None = None,
    mask_sample: Sequence[bool] | None = None,
    **_: Any,
) -> list[float | None]:
    """One reward per completion: the service's, or None where the rollout is masked."""
    if reward is None or mask_sample is None:
        raise MissingServiceFieldsError(
            "service_reward needs the `reward` and `mask_sample` fields that the service rollout_func "
            "returns (nemo_gym_prorl.integrations.trl.rollout); pass that rollout_func to GRPOTrainer"
        )
    if not len(reward) == len(mask_sample) == len(completions):
        raise ValueError(
            f"{len(completions)} completions but {len(reward)} rewards and {len(mask_sample)} masks"
        )
    return [
        None if masked or value is None else float(value)
        for value, masked in zip(reward, mask_sample, strict=True)
    ]
