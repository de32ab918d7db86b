# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Pipeline semantics: overlap, backpressure, priorities, budgets, cancellation, failures."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from support.scripted_stages import ScriptedHandler

from nemo_gym_prorl.pipeline import (
    DuplicateJobError,
    JobNotFoundError,
    JobResult,
    JobSpec,
    JobState,
    QueueFullError,
    Stage,
    UnknownTaskError,
)


def spec(**script: Any) -> JobSpec:
    return JobSpec(task="s", instance={"script": script} if script else {})


async def until(predicate: Any, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.005)


async def test_stages_of_different_jobs_overlap(make_pipeline: Any) -> None:
    pipeline, _ = await make_pipeline(init_workers=1, run_workers=1, eval_workers=1)
    started = time.monotonic()
    ids = pipeline.submit([spec(init_s=0.15, run_s=0.15, eval_s=0.15) for _ in range(4)])
    results, pending = await pipeline.wait(ids, timeout=5)
    elapsed = time.monotonic() - started
    assert not pending and all(r.state is JobState.DONE for r in results)
    # Serial, the wall time would be at least the stages' own active time (4 x 0.45 = 1.8 s); a
    # 3-stage pipeline needs (4 + 2) x 0.15 = 0.9 s. Measured against the stages' own times, so a
    # loaded machine that stretches every sleep stretches both sides.
    active = sum(r.timing.counted_elapsed for r in results)
    assert elapsed < 0.75 * active, (elapsed, active)


async def test_results_carry_timing_reward_and_trajectory(make_pipeline: Any) -> None:
    pipeline, _ = await make_pipeline()
    (job_id,) = pipeline.submit([JobSpec(task="scripted_source", instance={"script": {"reward": 0.5}})])
    (result,), _ = await pipeline.wait([job_id], timeout=5)
    assert result.task == "s"  # alias resolved to the registered name
    assert result.reward == 0.5 and result.reward_components == {"scripted": 0.5}
    assert result.trajectory is not None and result.trajectory.finish
    t = result.timing
    assert t.counted_elapsed == pytest.approx(t.init_time + t.run_time + t.eval_time)
    assert t.total_elapsed >= t.counted_elapsed and not t.timeout_triggered


async def test_data_source_selects_the_task_and_unknown_tasks_are_refused(make_pipeline: Any) -> None:
    pipeline, _ = await make_pipeline()
    (job_id,) = pipeline.submit([JobSpec(instance={"data_source": "scripted_source"})])
    assert pipeline.get(job_id).task == "s"
    with pytest.raises(UnknownTaskError, match="unknown task 'nope'"):
        pipeline.submit([spec(), JobSpec(task="nope")])
    with pytest.raises(UnknownTaskError, match="names no task"):
        pipeline.submit([JobSpec()])
    assert pipeline.status().submitted_total == 1  # the refused batch added nothing


async def test_a_resubmitted_id_is_the_same_job_and_an_id_of_another_job_is_refused(
    make_pipeline: Any,
) -> None:
    pipeline, _ = await make_pipeline()
    assert pipeline.submit([JobSpec(id="a", task="s")]) == ["a"]
    # A client retrying a submit whose answer it lost gets the same job, queued once ...
    assert pipeline.submit([JobSpec(id="a", task="s"), JobSpec(id="c", task="s")]) == ["a", "c"]
    await until(lambda: pipeline.get("a", mark_fetched=False).state.terminal)
    assert pipeline.submit([JobSpec(id="a", task="s")]) == ["a"]  # ... also once it has finished
    assert pipeline.status().submitted_total == 2
    with pytest.raises(DuplicateJobError, match="different job"):
        pipeline.submit([JobSpec(id="a", task="s", instance={"other": True})])
    with pytest.raises(DuplicateJobError, match="twice"):
        pipeline.submit([JobSpec(id="b", task="s"), JobSpec(id="b", task="s")])


async def test_admission_queue_is_bounded_and_atomic(make_pipeline: Any) -> None:
    pipeline, _ = await make_pipeline(init_workers=1, max_queued=5)
    pipeline.submit([spec(init_s=1.0)])  # occupies the worker
    await until(lambda: pipeline.status().stages[Stage.INIT].in_flight == 1)
    pipeline.submit([spec() for _ in range(3)])
    with pytest.raises(QueueFullError):
        pipeline.submit([spec() for _ in range(3)])
    assert pipeline.status().stages[Stage.INIT].queued == 3
    pipeline.submit([spec(), spec()])  # exactly fills it


async def test_backpressure_bounds_live_sandboxes(make_pipeline: Any) -> None:
    """RUN is slow and its queue holds 1: INIT must stop initialising (no pile of sandboxes)."""
    pipeline, handler = await make_pipeline(init_workers=4, run_workers=1, run_queue_size=1, eval_workers=1)
    ids = pipeline.submit([spec(run_s=0.1) for _ in range(12)])
    peak = 0

    async def watch() -> None:
        nonlocal peak
        while True:
            peak = max(peak, len(handler.live))
            await asyncio.sleep(0.002)

    watcher = asyncio.create_task(watch())
    results, pending = await pipeline.wait(ids, timeout=10)
    watcher.cancel()
    assert not pending and all(r.state is JobState.DONE for r in results)
    # 1 running + 1 queued for RUN + 4 INIT workers blocked in hand-off + 1 in EVAL.
    assert peak <= 1 + 1 + 4 + 1, peak
    assert max(r.timing.run_wait for r in results) > 0.1  # waiting was reported as waiting


async def test_priorities_order_each_queue(make_pipeline: Any) -> None:
    pipeline, handler = await make_pipeline(init_workers=1)
    pipeline.submit([JobSpec(id="blocker", task="s", instance={"script": {"init_s": 0.2}})])
    await until(lambda: handler.entered[Stage.INIT] == ["blocker"])
    pipeline.submit([JobSpec(id=f"low{i}", task="s") for i in range(3)])
    pipeline.submit([JobSpec(id="carried", task="s", priority=10)])
    pipeline.submit([JobSpec(id="neg", task="s", priority=-1)])
    await until(lambda: len(handler.entered[Stage.INIT]) == 6)
    assert handler.entered[Stage.INIT] == ["blocker", "carried", "low0", "low1", "low2", "neg"]


async def test_budget_excludes_queue_waiting(make_pipeline: Any) -> None:
    # One RUN worker, six 0.5 s runs: the last waits 2.5 s in the queue, more than the 2 s budget,
    # while each run leaves 1.5 s of the budget for a loaded machine's delays.
    pipeline, _ = await make_pipeline(run_workers=1, active_time_s=2.0)
    ids = pipeline.submit([spec(run_s=0.5) for _ in range(6)])
    results, _ = await pipeline.wait(ids, timeout=30)
    assert all(r.state is JobState.DONE for r in results), [r.error for r in results]
    last = max(results, key=lambda r: r.timing.run_wait)
    assert last.timing.run_wait > 2.0  # waited longer than the whole budget...
    assert last.timing.counted_elapsed < 2.0  # ...which only counts active time


async def test_active_budget_timeout(make_pipeline: Any) -> None:
    pipeline, handler = await make_pipeline()
    (job_id,) = pipeline.submit(
        [JobSpec(task="s", instance={"script": {"run_s": 30}}, budget={"active_time_s": 0.2})]
    )
    (result,), _ = await pipeline.wait([job_id], timeout=5)
    assert result.state is JobState.FAILED and result.critical_error == "timeout"
    assert result.timing.timeout_triggered and "active-time budget" in (result.error or "")
    # stopped by the budget: not before it, and long before the 30 s the script would run
    assert 0.2 <= result.timing.counted_elapsed < 10
    assert not handler.live  # the state was released


async def test_wall_deadline_counts_queue_time(make_pipeline: Any) -> None:
    pipeline, handler = await make_pipeline(init_workers=1)
    pipeline.submit([spec(init_s=1.0)])
    (job_id,) = pipeline.submit([JobSpec(task="s", budget={"wall_time_s": 0.2})])
    (result,), _ = await pipeline.wait([job_id], timeout=5)
    assert result.critical_error == "timeout" and result.timing.timeout_triggered
    assert result.timing.init_time == 0 and result.timing.init_wait >= 0.2
    assert job_id not in handler.entered[Stage.INIT]


@pytest.mark.parametrize("where", ["queued", "init", "run", "eval", "waiting_for_run"])
async def test_cancel_at_any_stage_releases(make_pipeline: Any, where: str) -> None:
    pipeline, handler = await make_pipeline(init_workers=1, run_workers=1, eval_workers=1)
    script = {"queued": {}, "init": {"init_s": 30}, "run": {"run_s": 30}, "eval": {"eval_s": 30}}
    if where in ("queued", "waiting_for_run"):
        pipeline.submit([spec(init_s=30) if where == "queued" else spec(run_s=30)])
    (job_id,) = pipeline.submit([JobSpec(task="s", instance={"script": script.get(where, {})})])
    wanted = {"queued": JobState.QUEUED, "waiting_for_run": JobState.RUN}.get(where) or JobState(where)
    await until(
        lambda: (
            pipeline.get(job_id).state is wanted and (where != "waiting_for_run" or job_id in handler.live)
        )
    )
    if where in ("init", "run", "eval"):
        await until(lambda: job_id in handler.entered[Stage(where)])
    result = await pipeline.cancel(job_id)
    assert result.state is JobState.CANCELLED and result.cancel_reason == "cancelled by request"
    assert job_id not in handler.live
    assert (job_id in handler.released) == (where not in ("queued", "init"))
    assert pipeline.status().live_jobs == (0 if where in ("init", "run", "eval") else 1)


async def test_cancel_finished_and_unknown(make_pipeline: Any) -> None:
    pipeline, _ = await make_pipeline()
    (job_id,) = pipeline.submit([spec()])
    await pipeline.wait([job_id], timeout=5)
    assert (await pipeline.cancel(job_id)).state is JobState.DONE
    with pytest.raises(JobNotFoundError):
        await pipeline.cancel("nope")


@pytest.mark.parametrize("stage", ["init", "run", "eval"])
async def test_stage_failure_is_reported_and_the_pipeline_goes_on(make_pipeline: Any, stage: str) -> None:
    pipeline, handler = await make_pipeline()
    bad, good = pipeline.submit([spec(fail=stage), spec()])
    results, _ = await pipeline.wait([bad, good], timeout=5)
    by_id = {r.id: r for r in results}
    assert by_id[bad].state is JobState.FAILED and by_id[bad].critical_error == stage
    assert "ScriptFailureError" in (by_id[bad].traceback or "") and f"in {stage}" in (by_id[bad].error or "")
    assert by_id[good].state is JobState.DONE
    assert not handler.live


@pytest.mark.parametrize("needs_state", [True, False])
async def test_run_sandbox_released_after_run_unless_eval_needs_it(
    make_pipeline: Any, needs_state: bool
) -> None:
    handler = ScriptedHandler(eval_needs_run_state=needs_state, eval_s=0.2)
    pipeline, _ = await make_pipeline(handler)
    (job_id,) = pipeline.submit([spec()])
    await until(lambda: job_id in handler.entered[Stage.EVAL])
    assert (job_id in handler.live) == needs_state  # during EVAL
    assert (handler.eval_states[job_id] is not None) == needs_state
    await pipeline.wait([job_id], timeout=5)
    assert not handler.live


async def test_stop_releases_everything(make_pipeline: Any) -> None:
    pipeline, handler = await make_pipeline(init_workers=2, run_workers=2, eval_workers=2)
    ids = pipeline.submit(
        [spec(init_s=0.05, run_s=30) for _ in range(3)] + [spec(eval_s=30) for _ in range(2)]
    )
    await until(lambda: len(handler.live) >= 3)
    await pipeline.stop()
    assert not handler.live
    assert {pipeline.get(i).state for i in ids} == {JobState.CANCELLED}


async def test_stop_closes_each_handler_once_and_a_failing_close_stops_nothing(make_pipeline: Any) -> None:
    class Pooled(ScriptedHandler):
        closed = 0

        async def aclose(self) -> None:
            Pooled.closed += 1
            raise RuntimeError("a grader worker would not die")

    pipeline, _ = await make_pipeline(Pooled())
    await pipeline.stop()
    await pipeline.stop()
    assert Pooled.closed == 1 and not pipeline.running


async def test_handler_that_swallows_cancellation_still_ends_cancelled(make_pipeline: Any) -> None:
    class Stubborn(ScriptedHandler):
        async def run(self, job: Any, state: Any) -> Any:
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                pass  # misbehaving: ignores the cancel
            return await super().run(job, state)

    pipeline, handler = await make_pipeline(Stubborn())
    (job_id,) = pipeline.submit([spec()])
    await until(lambda: job_id in handler.entered[Stage.RUN] or pipeline.get(job_id).state is JobState.RUN)
    await asyncio.sleep(0.05)
    result = await pipeline.cancel(job_id)
    assert result.state is JobState.CANCELLED and not handler.live


async def test_results_are_evicted_beyond_the_cap(make_pipeline: Any) -> None:
    pipeline, _ = await make_pipeline(max_retained_results=3)
    first = pipeline.submit([spec() for _ in range(3)])
    await pipeline.wait(first, timeout=5)  # fetched: evicted first
    second = pipeline.submit([spec() for _ in range(2)])
    await until(lambda: all(pipeline.get(i, mark_fetched=False).state.terminal for i in second))
    with pytest.raises(JobNotFoundError) as info:
        pipeline.get(first[0])
    assert info.value.evicted and "evicted" in str(info.value)
    assert pipeline.get(first[2]).state is JobState.DONE
    assert pipeline.status().retained_results == 3
    with pytest.raises(JobNotFoundError) as unknown:
        pipeline.get("never-submitted")
    assert not unknown.value.evicted


async def test_wait_any_and_stream_order(make_pipeline: Any) -> None:
    pipeline, _ = await make_pipeline()
    slow, fast = pipeline.submit([spec(run_s=0.3), spec()])
    results, pending = await pipeline.wait([slow, fast], timeout=5, mode="any")
    assert [r.id for r in results] == [fast] and pending == [slow]
    seen = [r.id async for r in pipeline.as_completed([slow, fast], timeout=5)]
    assert seen == [fast, slow]


async def test_a_result_delivered_as_it_finishes_is_marked_fetched_without_being_parsed_again(
    make_pipeline: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    pipeline, _ = await make_pipeline(max_retained_results=2)
    (delivered,) = pipeline.submit([spec(run_s=0.2)])
    parsed: list[Any] = []
    validate = JobResult.model_validate_json
    monkeypatch.setattr(
        JobResult, "model_validate_json", lambda data, **kw: parsed.append(data) or validate(data, **kw)
    )
    results = [r async for r in pipeline.as_completed([delivered], timeout=10)]
    assert [r.id for r in results] == [delivered] and parsed == []  # the finished object went out as it was
    monkeypatch.undo()
    # Delivered, so fetched: the first to go when two more results need the room.
    later = pipeline.submit([spec(), spec()])
    await until(lambda: all(pipeline.get(i, mark_fetched=False).state.terminal for i in later))
    with pytest.raises(JobNotFoundError):
        pipeline.get(delivered)
