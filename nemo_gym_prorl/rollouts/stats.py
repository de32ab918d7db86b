# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""What a set of finished rollouts says about the policy that made them: reward, how it used the
tools, how stale it was. One summary for a training step's groups and for an evaluation.

Pure Python and pydantic: the project venv and the trainers' model venv both import it."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, Field

from nemo_gym_prorl.intervals import Interval
from nemo_gym_prorl.rollouts.results import ServiceResult, mask_reason, scored_reward


class RolloutStats(BaseModel):
    """A summary of finished rollouts. Rewards and tool use count the scored ones only: a
    masked rollout (an infrastructure failure) says nothing about the policy."""

    rollouts: int
    scored: int
    masked: int
    mean_reward: float
    reward: Interval
    informative_groups: int = Field(description="groups whose scored rewards are not all equal")
    groups: int
    tool_calls_per_rollout: float
    turns_per_rollout: float
    generated_tokens: int
    policy_versions: list[int] = Field(description="every version the rollouts' model calls used")
    max_staleness: int | None
    stale: int = Field(description="rollouts past max_staleness, kept with the flag")
    unversioned: int = Field(
        0,
        description="scored rollouts whose model calls recorded no policy version (each should record its own)",
    )
    stop_reasons: dict[str, int]
    mask_reasons: dict[str, int]
    merged_share: float | None = Field(
        None,
        description="a harness's calls after each rollout's first whose prompt extended the previous call's "
        "tokens, pooled over the scored rollouts (None: no harness rollout)",
    )

    @classmethod
    def of(cls, results: Sequence[ServiceResult | Mapping[str, Any]]) -> RolloutStats:
        parsed = [r if isinstance(r, ServiceResult) else ServiceResult.model_validate(r) for r in results]
        scored = [r for r in parsed if scored_reward(r) is not None]
        rewards = [float(scored_reward(r) or 0.0) for r in scored]
        groups: dict[str, list[float]] = {}
        for result in scored:
            groups.setdefault(result.group_id or result.id, []).append(float(result.reward or 0.0))
        trajectories = [r.trajectory for r in scored if r.trajectory is not None]
        staleness = [r.staleness for r in parsed if r.staleness is not None]
        stops: dict[str, int] = {}
        for trajectory in trajectories:
            key = trajectory.stop_reason or "none"
            stops[key] = stops.get(key, 0) + 1
        masks: dict[str, int] = {}
        for result in parsed:
            reason = mask_reason(result)
            if reason is not None:
                key = reason.split(":")[0]
                masks[key] = masks.get(key, 0) + 1
        per = max(len(trajectories), 1)
        harnessed = [t.harness for t in trajectories if t.harness and t.harness.get("calls")]
        later = sum(int(h["calls"]) - 1 for h in harnessed)
        merged = sum((h.get("merged_share") or 0.0) * (int(h["calls"]) - 1) for h in harnessed)
        return cls(
            rollouts=len(parsed),
            scored=len(scored),
            masked=len(parsed) - len(scored),
            mean_reward=round(statistics.fmean(rewards), 4) if rewards else math.nan,
            reward=Interval.of(rewards),
            informative_groups=sum(len(set(v)) > 1 for v in groups.values()),
            groups=len(groups),
            tool_calls_per_rollout=round(sum(len(t.steps) for t in trajectories) / per, 3),
            turns_per_rollout=round(sum(t.num_turns for t in trajectories) / per, 3),
            generated_tokens=sum(t.generated_tokens for t in trajectories),
            policy_versions=sorted({v for r in parsed for v in r.policy_versions}),
            max_staleness=max(staleness) if staleness else None,
            stale=sum(r.stale for r in parsed),
            unversioned=sum(not r.policy_versions for r in scored),
            stop_reasons=stops,
            mask_reasons=masks,
            merged_share=round(merged / later, 4) if later else None,
        )
