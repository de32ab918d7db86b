# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""What the pipeline does when an executor loses the node a job ran on (no Ray needed: the
executor here is the in-process one, told to lose chosen stages)."""

from __future__ import annotations

from typing import Any

from support.scripted_stages import ScriptedHandler

from nemo_gym_prorl.pipeline import HandlerRegistry, JobResult, JobSpec, JobState, Pipeline, PipelineConfig
from nemo_gym_prorl.pipeline.executor import InfrastructureError, InProcessExecutor
from nemo_gym_prorl.pipeline.job import Job, Stage, Trajectory
from nemo_gym_prorl.pipeline.ray_executor import NodeRuntime, NodeShare, RayExecutor, RayExecutorConfig


class LosingExecutor(InProcessExecutor):
    """Places every start on a numbered node; loses RUN of the first `lose` starts."""

    def __init__(self, lose: int, max_attempts: int) -> None:
        self.lose = lose
        self.max_attempts = max_attempts
        self.starts = 0

    async def init(self, handler: Any, job: Job) -> Any:
        self.starts += 1
        return (f"node-{self.starts}", await handler.init(job))

    def node_of(self, state: Any) -> str | None:
        return state[0]

    async def run(self, handler: Any, job: Job, state: Any) -> Trajectory:
        if int(state[0].split("-")[1]) <= self.lose:
            raise InfrastructureError(f"{state[0]} died", state[0])
        return await super().run(handler, job, state[1])

    async def evaluate(self, handler: Any, job: Job, state: Any, trajectory: Trajectory) -> Any:
        return await super().evaluate(handler, job, state[1] if state else None, trajectory)

    async def release(self, handler: Any, state: Any) -> None:
        await handler.release(state[1])


async def _pipeline(executor: LosingExecutor) -> tuple[Pipeline, ScriptedHandler]:
    handler = ScriptedHandler()
    registry = HandlerRegistry()
    registry.register("s", handler)
    pipeline = Pipeline(registry, PipelineConfig(init_workers=1, run_workers=1, eval_workers=1), executor)
    await pipeline.start()
    return pipeline, handler


async def _run_one_job(
    executor: LosingExecutor,
) -> tuple[Pipeline, ScriptedHandler, str, JobResult, list[str]]:
    """One job through a pipeline over `executor`, which is stopped afterwards."""
    pipeline, handler = await _pipeline(executor)
    try:
        (job_id,) = pipeline.submit([JobSpec(task="s")])
        (result,), pending = await pipeline.wait([job_id], timeout=10)
    finally:
        await pipeline.stop()
    return pipeline, handler, job_id, result, pending


async def test_a_job_whose_node_is_lost_runs_again_with_a_fresh_state_and_says_so() -> None:
    pipeline, handler, job_id, result, _ = await _run_one_job(LosingExecutor(lose=1, max_attempts=3))
    assert result.state is JobState.DONE and not result.mask_sample
    assert result.infra_retries == 1
    assert [(a.node, a.stage, a.lost is not None) for a in result.attempts] == [
        ("node-1", "run", True),
        ("node-2", "eval", False),
    ]
    assert handler.entered["init"] == [job_id, job_id]  # a second INIT: a fresh sandbox
    assert handler.live == set()  # both states were released
    assert pipeline.status().infra_retries_total == 1


async def test_when_attempts_run_out_the_result_is_masked_not_lost() -> None:
    _, handler, _, result, pending = await _run_one_job(LosingExecutor(lose=5, max_attempts=2))
    assert pending == []
    assert result.state is JobState.FAILED and result.critical_error == "run"
    assert result.mask_sample and result.infra_retries == 1 and len(result.attempts) == 2
    assert "node-2 died" in (result.error or "")
    assert handler.live == set()


async def test_a_lost_job_goes_back_ahead_of_jobs_that_were_already_waiting() -> None:
    pipeline, handler = await _pipeline(LosingExecutor(lose=1, max_attempts=3))
    try:
        ids = pipeline.submit([JobSpec(task="s", id=f"j{i}") for i in range(3)])
        await pipeline.wait(ids, timeout=10)
    finally:
        await pipeline.stop()
    # j0 lost its node in RUN; its second INIT came before j2's first.
    inits = handler.entered["init"]
    assert inits.index("j0", 1) < inits.index("j2")


async def test_the_in_process_executor_places_nothing_and_records_no_attempts() -> None:
    handler = ScriptedHandler()
    registry = HandlerRegistry()
    registry.register("s", handler)
    pipeline = Pipeline(registry, PipelineConfig(init_workers=1, run_workers=1, eval_workers=1))
    await pipeline.start()
    try:
        ids = pipeline.submit([JobSpec(task="s")])
        (result,), _ = await pipeline.wait(ids, timeout=10)
    finally:
        await pipeline.stop()
    assert result.state is JobState.DONE
    assert result.attempts == [] and result.infra_retries == 0 and not result.mask_sample
    assert pipeline.status().nodes == []


async def test_with_no_live_node_for_too_long_waiting_jobs_fail_masked_instead_of_waiting_forever() -> None:
    # A Ray executor whose every node is gone (none ever started here: no Ray needed).
    config = RayExecutorConfig(no_node_timeout_s=0.3, health_interval_s=0.05, max_attempts=2)
    executor = RayExecutor(config, build=_never_built)
    handler = ScriptedHandler()
    registry = HandlerRegistry()
    registry.register("s", handler)
    pipeline = Pipeline(registry, PipelineConfig(init_workers=2, run_workers=1, eval_workers=1), executor)
    await pipeline.start()
    try:
        ids = pipeline.submit([JobSpec(task="s"), JobSpec(task="s")])
        results, pending = await pipeline.wait(ids, timeout=20)
    finally:
        await pipeline.stop()
    assert pending == []
    for result in results:
        assert result.state is JobState.FAILED and result.critical_error == "init"
        assert result.mask_sample and "no live Ray node for 0.3s" in (result.error or "")
        assert len(result.attempts) == 2 and all(a.node is None for a in result.attempts)
    assert handler.entered[Stage.INIT] == []  # nothing ever ran


async def _never_built(share: NodeShare) -> NodeRuntime:
    raise AssertionError("no node should be built")
