# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Evaluate the policy the service serves now on the held-out tasks, through the service.

Every phase (base, after SFT, after GRPO) runs the same tasks once each with the same sampling,
unconstrained, so two phases compare task by task: `paired_gain` is the mean per-task reward
difference with its 95% interval (`nemo_gym_prorl.intervals`), over all tasks or over a set of
families. Each task carries its family, so every family is reported on its own and a family that
one phase taught and the next one lost shows.

Beside that one sample per task, `measure` can run each task of some families greedily and k-1
more times at the run's temperature: a gain in the first sample and the greedy one that pass@k
does not share is sharpening (the policy picks what it could already reach more often); a gain in
pass@k is something it could not reach before. Every metric pairs the same tasks, phase by phase."""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from nemo_gym_prorl.intervals import Interval
from nemo_gym_prorl.intervals import paired_gain as paired_interval
from nemo_gym_prorl.rollouts.results import ServiceResult, scored_reward
from nemo_gym_prorl.rollouts.stats import RolloutStats
from nemo_gym_prorl.service.client import AsyncRolloutClient

Metric = Literal["sample", "greedy", "pass"]


class MeasureSettings(BaseModel):
    """Greedy and pass@k beside the evaluation's one sample per task."""

    model_config = ConfigDict(extra="forbid")

    phases: list[Literal["base", "sft", "grpo"]] = Field(
        default_factory=lambda: ["sft", "grpo"], description="the evaluated phases measured so"
    )
    families: Literal["all", "rl_families"] = Field(
        "rl_families",
        description="the tasks measured: every held-out task, or the RL families' (RL's gain is the one "
        "a reader asks about: sharpened or new)",
    )
    greedy: bool = Field(True, description="each task once more at temperature 0")
    k: int = Field(
        4, ge=2, le=16, description="pass@k: the evaluation's sample and k-1 more at its temperature"
    )


class PolicyEvaluation(BaseModel):
    phase: str
    policy_version: int | None = Field(description="the published version evaluated (None: the base model)")
    stats: RolloutStats
    rewards: list[float | None] = Field(description="per held-out task, in order (None: masked)")
    families: list[str] = Field(default_factory=list, description="per held-out task, in order")
    by_family: dict[str, RolloutStats] = Field(default_factory=dict)
    seconds: float
    measured_families: list[str] = Field(
        default_factory=list, description="the families `greedy` and `pass_at_k` cover (none: not measured)"
    )
    greedy: list[float | None] = Field(
        default_factory=list,
        description="per task of the measured families, in order: the greedy sample's reward",
    )
    pass_k: int | None = Field(None, description="k of `pass_at_k`")
    pass_at_k: list[float | None] = Field(
        default_factory=list,
        description="per task of the measured families, in order: the best of its k samples' rewards",
    )
    measure_summary: dict[str, Interval] = Field(
        default_factory=dict,
        description="on the measured tasks: the first sample's, the greedy sample's and pass@k's mean reward",
    )
    measure_seconds: float = 0.0

    def family_rewards(
        self, families: Collection[str] | None = None, metric: Metric = "sample"
    ) -> list[float | None]:
        """The rewards of the tasks of `families` (None: every task), in order: the first sample's,
        the greedy sample's or pass@k's."""
        if metric == "sample":
            values, of = self.rewards, self.families
            if families is None:
                return list(values)
        else:
            values = self.greedy if metric == "greedy" else self.pass_at_k
            of = [f for f in self.families if f in self.measured_families]
            families = self.measured_families if families is None else families
            if not self.measures(metric, families):
                raise ValueError(
                    f"the {self.phase} evaluation did not measure {metric} on {sorted(families)}"
                )
        if len(of) != len(values):
            raise ValueError(f"the {self.phase} evaluation does not record each task's family")
        return [r for r, f in zip(values, of, strict=True) if f in families]

    def measures(self, metric: Metric, families: Collection[str] | None) -> bool:
        """Whether `metric` was measured on every task of `families` (None: every family)."""
        if metric == "sample":
            return True
        values = self.greedy if metric == "greedy" else self.pass_at_k
        wanted = set(self.families) if families is None else set(families)
        return bool(values) and wanted <= set(self.measured_families)


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
        _job(row, sampling, {"evaluation": phase, "task": i, "family": families[i]}, task)
        for i, row in enumerate(rows)
    ]
    results = await client.run(jobs, timeout_s=timeout_s)
    dumped = [result.model_dump(mode="json") for result in results]
    # Masked as the trainer masks: one rule for the rewards paired here and the statistics beside them.
    rewards: list[float | None] = [_scored(result) for result in dumped]
    by_family: dict[str, list[dict[str, Any]]] = {}
    for family, result in zip(families, dumped, strict=True):
        by_family.setdefault(family, []).append(result)
    return PolicyEvaluation(
        phase=phase,
        policy_version=policy.served.current.version if policy.served.current else None,
        stats=RolloutStats.of(dumped),
        rewards=rewards,
        families=list(families),
        by_family={family: RolloutStats.of(group) for family, group in by_family.items()},
        seconds=round(time.monotonic() - started, 2),
    )


async def measure(
    client: AsyncRolloutClient,
    rows: Sequence[Mapping[str, Any]],
    evaluation: PolicyEvaluation,
    families: Collection[str],
    settings: MeasureSettings,
    *,
    sampling: Mapping[str, Any],
    timeout_s: float,
    task: str | None = None,
) -> None:
    """Greedy and pass@k on the tasks of `families` beside `evaluation`'s one sample per task
    (which is pass@k's first), written into it. Masked samples are left out of the best; a task
    all of whose samples were masked is masked."""
    started = time.monotonic()
    chosen = [i for i, family in enumerate(evaluation.families) if family in families]
    greedy = {**sampling, "temperature": 0.0, "top_p": 1.0}
    jobs: list[dict[str, Any]] = []
    for i in chosen:
        runs = [("greedy", greedy)] if settings.greedy else []
        runs += [(f"sample{n}", sampling) for n in range(1, settings.k)]
        jobs += [
            _job(rows[i], params, {"evaluation": evaluation.phase, "task": i, "measure": name}, task)
            for name, params in runs
        ]
    results = await client.run(jobs, timeout_s=timeout_s)
    per_task = len(jobs) // max(len(chosen), 1)
    evaluation.measured_families = [f for f in dict.fromkeys(evaluation.families) if f in families]
    evaluation.greedy, evaluation.pass_at_k = [], []
    for n, i in enumerate(chosen):
        own = [_scored(r.model_dump(mode="json")) for r in results[n * per_task : (n + 1) * per_task]]
        if settings.greedy:
            evaluation.greedy.append(own.pop(0))
        scored = [r for r in [evaluation.rewards[i], *own] if r is not None]
        evaluation.pass_at_k.append(max(scored) if scored else None)
    evaluation.pass_k = settings.k
    by_metric = {
        "first_sample": evaluation.family_rewards(evaluation.measured_families),
        **({"greedy": evaluation.greedy} if settings.greedy else {}),
        f"pass@{settings.k}": evaluation.pass_at_k,
    }
    evaluation.measure_summary = {
        name: Interval.of([v for v in values if v is not None]) for name, values in by_metric.items()
    }
    evaluation.measure_seconds = round(time.monotonic() - started, 2)


def _job(
    row: Mapping[str, Any], sampling: Mapping[str, Any], metadata: dict[str, Any], task: str | None
) -> dict[str, Any]:
    """One evaluation rollout of `row`, run as `task` (None: its `data_source` picks)."""
    return {
        "instance": dict(row),
        "sampling_params": dict(sampling),
        "metadata": metadata,
        **({"task": task} if task is not None else {}),
    }


def _scored(result: Mapping[str, Any]) -> float | None:
    """A result's reward as the trainer counts it (masked: None)."""
    return scored_reward(ServiceResult.model_validate(result))


def paired_gain(
    before: PolicyEvaluation,
    after: PolicyEvaluation,
    families: Collection[str] | None = None,
    metric: Metric = "sample",
) -> Interval:
    """Mean per-task reward gain from `before` to `after` over the tasks of `families` (None: all)
    scored in both, with its 95% interval (valid at 0 and 1): of the first sample, the greedy
    sample or pass@k."""
    old, new = before.family_rewards(families, metric), after.family_rewards(families, metric)
    if len(old) != len(new):
        raise ValueError("the two evaluations did not run the same tasks")
    pairs = [(a, b) for a, b in zip(old, new, strict=True) if a is not None and b is not None]
    return paired_interval([a for a, _ in pairs], [b for _, b in pairs])
