# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Evaluate the policy the service serves now on the held-out tasks, through the service.

Every phase (base, after SFT, after GRPO) runs the same tasks once each with the same sampling,
unconstrained, so two phases compare task by task: `paired_gain` is the mean per-task reward
difference with its 95% interval (`nemo_gym_prorl.intervals`), over all tasks or over a set of
families. Each task carries its family, so every family is reported on its own and a family that
one phase taught and the next one lost shows."""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, Field

from nemo_gym_prorl.intervals import Interval
from nemo_gym_prorl.intervals import paired_gain as paired_interval
from nemo_gym_prorl.rollouts.results import ServiceResult, scored_reward
from nemo_gym_prorl.rollouts.stats import RolloutStats
from nemo_gym_prorl.service.client import AsyncRolloutClient


class PolicyEvaluation(BaseModel):
    phase: str
    policy_version: int | None = Field(description="the published version evaluated (None: the base model)")
    stats: RolloutStats
    rewards: list[float | None] = Field(description="per held-out task, in order (None: masked)")
    families: list[str] = Field(default_factory=list, description="per held-out task, in order")
    by_family: dict[str, RolloutStats] = Field(default_factory=dict)
    seconds: float

    def family_rewards(self, families: Collection[str] | None = None) -> list[float | None]:
        """The rewards of the tasks of `families` (None: every task), in order."""
        if families is None:
            return list(self.rewards)
        if len(self.families) != len(self.rewards):
            raise ValueError(f"the {self.phase} evaluation does not record each task's family")
        return [r for r, f in zip(self.rewards, self.families, strict=True) if f in families]


async def evaluate(
    client: AsyncRolloutClient,
    rows: Sequence[Mapping[str, Any]],
    families: Sequence[str],
    *,
    phase: str,
    sampling: Mapping[str, Any],
    timeout_s: float,
    task: str | None = None,
) -> PolicyEvaluation:
    """Run each held-out row once; `families[i]` names row i's family; `task`: the service task
    every row runs as (None: its `data_source` picks)."""
    if len(families) != len(rows):
        raise ValueError(f"{len(rows)} held-out rows but {len(families)} families")
    started = time.monotonic()
    policy = await client.policy()
    jobs = [
        {
            "instance": dict(row),
            "sampling_params": dict(sampling),
            "metadata": {"evaluation": phase, "task": i, "family": families[i]},
            **({"task": task} if task is not None else {}),
        }
        for i, row in enumerate(rows)
    ]
    results = await client.run(jobs, timeout_s=timeout_s)
    dumped = [result.model_dump(mode="json") for result in results]
    by_family: dict[str, list[dict[str, Any]]] = {}
    for family, result in zip(families, dumped, strict=True):
        by_family.setdefault(family, []).append(result)
    # Masked as the trainer masks: one rule for the rewards paired here and the statistics beside them.
    rewards: list[float | None] = [scored_reward(ServiceResult.model_validate(r)) for r in dumped]
    return PolicyEvaluation(
        phase=phase,
        policy_version=policy.served.current.version if policy.served.current else None,
        stats=RolloutStats.of(dumped),
        rewards=rewards,
        families=list(families),
        by_family={family: RolloutStats.of(group) for family, group in by_family.items()},
        seconds=round(time.monotonic() - started, 2),
    )


def paired_gain(
    before: PolicyEvaluation, after: PolicyEvaluation, families: Collection[str] | None = None
) -> Interval:
    """Mean per-task reward gain from `before` to `after` over the tasks of `families` (None: all)
    scored in both, with its 95% interval (valid at 0 and 1)."""
    old, new = before.family_rewards(families), after.family_rewards(families)
    if len(old) != len(new):
        raise ValueError("the two evaluations did not run the same tasks")
    pairs = [(a, b) for a, b in zip(old, new, strict=True) if a is not None and b is not None]
    return paired_interval([a for a, _ in pairs], [b for _, b in pairs])
