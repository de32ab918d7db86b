# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Evaluate the policy the service serves now on the held-out tasks, through the service.

Every phase (base, after SFT, after GRPO) runs the same tasks once each with the same sampling,
unconstrained, so two phases compare task by task: `paired_gain` is the mean per-task reward
difference with its 95% interval."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, Field

from nemo_gym_prorl.integrations.trl.stats import Interval, RolloutStats
from nemo_gym_prorl.service.client import AsyncRolloutClient


class PolicyEvaluation(BaseModel):
    phase: str
    policy_version: int | None = Field(description="the published version evaluated (None: the base model)")
    stats: RolloutStats
    rewards: list[float | None] = Field(description="per held-out task, in order (None: masked)")
    seconds: float


async def evaluate(
    client: AsyncRolloutClient,
    rows: Sequence[Mapping[str, Any]],
    *,
    phase: str,
    sampling: Mapping[str, Any],
    timeout_s: float,
) -> PolicyEvaluation:
    started = time.monotonic()
    policy = await client.policy()
    jobs = [
        {
            "instance": dict(row),
            "sampling_params": dict(sampling),
            "metadata": {"evaluation": phase, "task": i},
        }
        for i, row in enumerate(rows)
    ]
    results = await client.run(jobs, timeout_s=timeout_s)
    dumped = [result.model_dump(mode="json") for result in results]
    stats = RolloutStats.of(dumped)
    rewards: list[float | None] = [
        r.reward if r.state == "done" and not r.mask_sample and r.reward is not None else None
        for r in results
    ]
    return PolicyEvaluation(
        phase=phase,
        policy_version=policy.served.current.version if policy.served.current else None,
        stats=stats,
        rewards=rewards,
        seconds=round(time.monotonic() - started, 2),
    )


def paired_gain(before: PolicyEvaluation, after: PolicyEvaluation) -> Interval:
    """Mean per-task reward gain from `before` to `after` (tasks scored in both), 95% interval."""
    if len(before.rewards) != len(after.rewards):
        raise ValueError("the two evaluations did not run the same tasks")
    diffs = [
        b - a for a, b in zip(before.rewards, after.rewards, strict=True) if a is not None and b is not None
    ]
    return Interval.of(diffs)
