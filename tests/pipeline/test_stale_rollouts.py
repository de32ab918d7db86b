# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""A finished rollout knows how many policy versions it lags the trainer; past `max_staleness`
it is flagged, dropped (masked, never lost) or run again on the current policy, as configured,
and each verdict is counted."""

from __future__ import annotations

import asyncio
from typing import Any

from support.scripted_stages import ScriptedHandler

from nemo_gym_prorl.pipeline import HandlerRegistry, JobResult, JobSpec, JobState, Pipeline, PipelineConfig
from nemo_gym_prorl.pipeline.policy_clock import PolicyClock


class Trainer:
    """The version the backends serve, moved by the test as a trainer's publishes would."""

    def __init__(self) -> None:
        self.version = 0


async def run_one(
    trainer: Trainer, staleness: dict[str, Any], *, run_s: float = 0.3, bump_to: int = 3
) -> tuple[JobResult, Pipeline]:
    """One job that samples with the version current when its RUN starts, while the trainer
    moves to `bump_to` during that RUN."""
    handler = ScriptedHandler(run_s=run_s, policy_version=lambda: trainer.version)
    registry = HandlerRegistry()
    registry.register("s", handler)
    pipeline = Pipeline(registry, PipelineConfig(deadline_check_s=0.05, staleness=staleness))
    pipeline.policy_clock = PolicyClock(lambda: trainer.version)
    await pipeline.start()
    try:
        (job_id,) = pipeline.submit([JobSpec(task="s")])
        await asyncio.sleep(run_s / 2)
        trainer.version = bump_to
        (result,) = [r async for r in pipeline.as_completed([job_id], 30)]
        return result, pipeline
    finally:
        await pipeline.stop()


async def test_within_the_bound_a_rollout_is_kept_with_its_staleness_recorded() -> None:
    result, pipeline = await run_one(Trainer(), {"max_staleness": 4, "action": "drop"})
    assert result.state is JobState.DONE
    assert (result.policy_versions, result.staleness, result.stale) == ([0], 3, False)
    assert not result.mask_sample and pipeline.status().stale_total == {}


async def test_flag_keeps_a_stale_rollout_and_marks_it() -> None:
    result, pipeline = await run_one(Trainer(), {"max_staleness": 1, "action": "flag"})
    assert (result.state, result.staleness, result.stale, result.mask_sample) == (
        JobState.DONE,
        3,
        True,
        False,
    )
    assert pipeline.status().stale_total == {"flag": 1}


async def test_drop_masks_a_stale_rollout_so_no_trainer_learns_from_it() -> None:
    result, pipeline = await run_one(Trainer(), {"max_staleness": 1, "action": "drop"})
    assert result.state is JobState.DONE and result.mask_sample and result.stale
    assert "versions behind the trainer" in result.report["stale"]
    assert pipeline.status().stale_total == {"drop": 1}


async def test_rerun_samples_the_rollout_again_on_the_current_policy() -> None:
    result, pipeline = await run_one(Trainer(), {"max_staleness": 1, "action": "rerun"})
    assert result.state is JobState.DONE
    assert (result.policy_versions, result.staleness, result.stale_reruns) == ([3], 0, 1)
    assert not result.stale and not result.mask_sample
    assert pipeline.status().stale_total == {"rerun": 1}


async def test_a_rollout_that_stays_stale_is_dropped_once_its_reruns_are_spent() -> None:
    trainer = Trainer()
    handler = ScriptedHandler(run_s=0.05)  # samples with the trainer step its job carries
    registry = HandlerRegistry()
    registry.register("s", handler)
    config = PipelineConfig(staleness={"max_staleness": 1, "action": "rerun", "max_reruns": 2})
    pipeline = Pipeline(registry, config)
    pipeline.policy_clock = PolicyClock(lambda: trainer.version)
    await pipeline.start()
    try:
        old, new = pipeline.submit([JobSpec(task="s", policy_version=2), JobSpec(task="s", policy_version=7)])
        results = {r.id: r async for r in pipeline.as_completed([old, new], 30)}
    finally:
        await pipeline.stop()
    assert pipeline.policy_clock.current() == 7  # the newest step a submission carried
    assert (results[old].stale_reruns, results[old].mask_sample, results[old].staleness) == (2, True, 5)
    assert (results[new].staleness, results[new].mask_sample) == (0, False)
    assert pipeline.status().stale_total == {"rerun": 3}


async def test_without_a_bound_or_a_trainer_version_nothing_is_judged() -> None:
    result, _ = await run_one(Trainer(), {})
    assert (result.staleness, result.stale) == (3, False)
    registry = HandlerRegistry()
    registry.register("s", ScriptedHandler())
    quiet = Pipeline(registry, PipelineConfig(staleness={"max_staleness": 0, "action": "drop"}))
    await quiet.start()
    try:
        (job_id,) = quiet.submit([JobSpec(task="s")])
        (result,) = [r async for r in quiet.as_completed([job_id], 30)]
    finally:
        await quiet.stop()
    assert (result.staleness, result.mask_sample) == (None, False)  # no version known: no lag
