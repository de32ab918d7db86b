# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Waiting for a model slot is backpressure, not the job's work: a job whose turns wait long for
a free backend does not time out for it; the wait is reported as `model_wait_s`."""

from __future__ import annotations

import asyncio
from typing import Any

from support.scripted_stages import ScriptedHandler, ScriptedState

from nemo_gym_prorl.llm.balancer import Balancer, BalancerConfig
from nemo_gym_prorl.pipeline import JobSpec, JobState
from nemo_gym_prorl.pipeline.job import Job, Trajectory


class SlotQueuedHandler(ScriptedHandler):
    """Each of its turns first takes a slot of the model pool's balancer, as a real turn does."""

    def __init__(self, balancer: Balancer, turns: int = 2) -> None:
        super().__init__()
        self.balancer = balancer
        self.turns = turns

    async def run(self, job: Job, state: ScriptedState) -> Trajectory:
        for _ in range(self.turns):
            lease = await self.balancer.acquire(job.id)
            self.balancer.release(lease)
        return await super().run(job, state)


def one_busy_slot() -> tuple[Balancer, Any]:
    balancer = Balancer(BalancerConfig(max_in_flight=1))
    balancer.add("backend")
    return balancer, balancer.acquire()


async def test_a_job_whose_turns_wait_for_a_slot_past_its_budget_does_not_time_out(
    make_pipeline: Any,
) -> None:
    balancer, hog = one_busy_slot()
    held = await hog
    pipeline, _ = await make_pipeline(SlotQueuedHandler(balancer))
    (job_id,) = pipeline.submit([JobSpec(task="s", budget={"active_time_s": 0.2})])
    await asyncio.sleep(0.6)  # three budgets' worth, all of it spent waiting for the slot
    balancer.release(held)
    (result,), _ = await pipeline.wait([job_id], timeout=10)
    assert result.state is JobState.DONE, result.error
    assert result.timing.model_wait_s > 0.2  # the wait is there, reported apart...
    assert result.timing.counted_elapsed < 0.2  # ...and not charged to the active budget
    assert not result.timing.timeout_triggered


async def test_the_wall_deadline_still_ends_a_job_that_waits_for_a_slot(make_pipeline: Any) -> None:
    balancer, hog = one_busy_slot()
    held = await hog
    pipeline, handler = await make_pipeline(SlotQueuedHandler(balancer))
    (job_id,) = pipeline.submit([JobSpec(task="s", budget={"wall_time_s": 0.2})])
    (result,), _ = await pipeline.wait([job_id], timeout=10)
    balancer.release(held)
    assert result.state is JobState.FAILED and result.critical_error == "timeout"
    assert "wall deadline" in (result.error or "")
    assert not handler.live and balancer.stats().waiting == 0  # released, and out of the line
