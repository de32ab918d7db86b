# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Prompt groups for GRPO/DAPO: when a group's rewards carry no signal, and what a judged group is.

A group is the G rollouts of one prompt. GRPO's advantage is each reward minus the group's
baseline, scaled by the group's std: when every valid reward is the same the advantage is zero
for all G samples and the group trains nothing. DAPO's dynamic sampling drops such groups.

Samples whose infrastructure failed (`critical_error`, `mask_sample`, cancelled by someone
else) are not evidence about the prompt: they are never read as a zero reward. The scheduler
retries them; what remains failed is either masked (judged on the valid samples, as NeMo RL's
baseline/std ignore masked samples) or fails the whole group, per configuration.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from nemo_gym_prorl.pipeline.job import JobResult, JobState


class UniformRule(BaseModel):
    """When a group counts as uniform (zero-variance) and is dropped.

    `all_equal` is NeMo RL's trainer-side rule (`std != 0.0` keeps a group); `std` drops groups
    whose sample std (ddof=1, as `torch.std`) is <= `eps`, for rewards with float noise.
    """

    model_config = ConfigDict(extra="forbid")

    mode: Literal["all_equal", "std"] = "all_equal"
    eps: float = Field(0.0, ge=0.0, description="Threshold of mode `std`.")

    def is_uniform(self, rewards: Sequence[float]) -> bool:
        # One valid sample (or none) gives no baseline to compare against: no signal either.
        if len(rewards) < 2:
            return True
        if self.mode == "all_equal":
            return max(rewards) == min(rewards)
        return reward_std(rewards) <= self.eps


def reward_std(rewards: Sequence[float]) -> float:
    """Sample standard deviation (ddof=1); 0.0 for fewer than two rewards."""
    n = len(rewards)
    if n < 2:
        return 0.0
    mean = sum(rewards) / n
    return math.sqrt(sum((r - mean) ** 2 for r in rewards) / (n - 1))


def infrastructure_failure(result: JobResult) -> str | None:
    """Why a finished rollout is not a valid sample of the policy, or None when it is.

    A DONE job with `report.mask_sample` (a task's evaluator could not run) is as invalid as a
    FAILED one: its reward is a placeholder, not a judgement of the trajectory.
    """
    if result.state is JobState.DONE:
        if result.report.get("mask_sample"):
            return f"mask_sample: {result.report.get('detail') or result.report.get('reason') or 'infrastructure'}"
        if result.reward is None or not math.isfinite(result.reward):
            return "no finite reward"
        return None
    if result.state is JobState.FAILED:
        return f"critical_error={result.critical_error}: {result.error or ''}".strip()
    if result.state is JobState.CANCELLED:
        return f"cancelled: {result.cancel_reason or 'unknown reason'}"
    return f"not finished ({result.state})"


class GroupStatus(StrEnum):
    INFORMATIVE = "informative"  # non-uniform rewards: delivered for training
    UNIFORM = "uniform"  # zero variance: dropped
    FAILED = "failed"  # too few valid samples after retries: dropped and reported


class GroupResult(BaseModel):
    """One judged prompt group. `samples[k]` is sample k's final attempt (in sample order);
    `masked[k]` says it is an infrastructure failure kept only as a masked placeholder."""

    group_id: str
    prompt_key: str
    status: GroupStatus
    batch_index: int = Field(description="The batch in which the group was judged.")
    started_batch: int = Field(description="The batch in which its prompt was started.")
    carried_over: bool = Field(False, description="Started in an earlier batch than it was judged in.")
    rewards: list[float | None] = Field(description="Per sample; None for masked samples.")
    reward_mean: float | None = None
    reward_std: float | None = None
    masked: list[bool] = Field(default_factory=list)
    rollouts_spent: int = Field(description="Finished rollouts this group consumed, retries included.")
    retries: int = 0
    failures: list[str] = Field(
        default_factory=list, description="Infrastructure failures seen (retried or not)."
    )
    elapsed_s: float = Field(0.0, description="From the prompt's start to the group's judgement.")
    row: dict[str, Any] = Field(default_factory=dict, description="The prompt's dataset row.")
    samples: list[JobResult] = Field(default_factory=list)

    def summary(self) -> GroupResult:
        """The same group without the (large) sample results and row."""
        return self.model_copy(update={"samples": [], "row": {}})


def judge(
    rewards: Sequence[float | None], rule: UniformRule, *, min_valid: int = 2
) -> tuple[GroupStatus, float | None, float | None]:
    """Status, mean and std of a group from its per-sample rewards (None = masked)."""
    valid = [r for r in rewards if r is not None]
    if len(valid) < min_valid:
        return GroupStatus.FAILED, None, None
    mean = sum(valid) / len(valid)
    status = GroupStatus.UNIFORM if rule.is_uniform(valid) else GroupStatus.INFORMATIVE
    return status, mean, reward_std(valid)
