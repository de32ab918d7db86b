# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The three-stage asynchronous pipeline: INIT pool -> RUN pool -> EVAL pool.

Each stage has its own worker pool and bounded priority queue. A worker pops a job and runs
that one stage as a child task (so cancelling a job never kills the worker), then the job is
handed to the next stage's queue. The hand-off waits while that queue is full: a stage cannot
run ahead of the next one by more than the queue bound (backpressure), so INIT never piles up
live sandboxes that RUN cannot take.

Time: a job's active-time budget counts only time inside stages; waits are reported apart.
A per-request wall deadline (queue waits included) is enforced too. Both end the job with
critical_error = "timeout".
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import traceback
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Literal

from pydantic import BaseModel, Field

from nemo_gym_prorl.pipeline.config import PipelineConfig
from nemo_gym_prorl.pipeline.executor import (
    InfrastructureError,
    InProcessExecutor,
    NodeStatus,
    StageExecutor,
)
from nemo_gym_prorl.pipeline.handler import HandlerRegistry, RolloutFailure
from nemo_gym_prorl.pipeline.job import (
    Attempt,
    CriticalError,
    Job,
    JobResult,
    JobSpec,
    JobState,
    Stage,
    new_job_id,
)
from nemo_gym_prorl.pipeline.queue import QueueFullError, StageQueue
from nemo_gym_prorl.pipeline.record import JobRecord
from nemo_gym_prorl.pipeline.store import JobNotFoundError, ResultStore

logger = logging.getLogger(__name__)

_NEXT = {Stage.INIT: Stage.RUN, Stage.RUN: Stage.EVAL}


class DuplicateJobError(ValueError):
    pass


class PipelineClosedError(RuntimeError):
    pass


class StageStatus(BaseModel):
    workers: int
    queued: int
    queue_capacity: int
    in_flight: int


class PipelineStatus(BaseModel):
    running: bool
    stages: dict[Stage, StageStatus]
    live_jobs: int
    retained_results: int
    submitted_total: int
    finished_total: dict[JobState, int]
    critical_errors_total: dict[str, int]
    evicted_total: int
    infra_retries_total: int = 0
    nodes: list[NodeStatus] = Field(
        default_factory=list, description="Where jobs run (empty for the in-process executor)."
    )


class StageTotals:
    """Sums for the metrics endpoint (seconds and counts per stage)."""

    def __init__(self) -> None:
        self.active_s = dict.fromkeys(Stage, 0.0)
        self.wait_s = dict.fromkeys(Stage, 0.0)
        self.count = dict.fromkeys(Stage, 0)


class Pipeline:
    def __init__(
        self,
        handlers: HandlerRegistry,
        config: PipelineConfig | None = None,
        executor: StageExecutor | None = None,
    ) -> None:
        self.handlers = handlers
        self.config = config or PipelineConfig()
        self.executor: StageExecutor = executor or InProcessExecutor()
        cfg = self.config
        assert cfg.run_queue_size is not None and cfg.eval_queue_size is not None
        self._workers_per_stage = {
            Stage.INIT: cfg.init_workers,
            Stage.RUN: cfg.run_workers,
            Stage.EVAL: cfg.eval_workers,
        }
        self._queues: dict[Stage, StageQueue[JobRecord]] = {
            Stage.INIT: StageQueue(cfg.max_queued),
            Stage.RUN: StageQueue(cfg.run_queue_size),
            Stage.EVAL: StageQueue(cfg.eval_queue_size),
        }
        self._live: dict[str, JobRecord] = {}
        self._store = ResultStore(cfg.max_retained_results, cfg.max_evicted_ids)
        self._in_flight = dict.fromkeys(Stage, 0)
        self._workers: list[asyncio.Task[None]] = []
        self._janitor: asyncio.Task[None] | None = None
        self._releases: set[asyncio.Task[None]] = set()
        self._background: set[asyncio.Task[None]] = set()
        self._running = False
        self._closed = False
        self.submitted_total = 0
        self.finished_total = {s: 0 for s in JobState if s.terminal}
        self.critical_errors_total: dict[str, int] = {}
        self.infra_retries_total = 0
        self.stage_totals = StageTotals()

    # -- lifecycle --------------------------------------------------------------------------
    async def start(self) -> None:
        if self._closed:
            raise PipelineClosedError("pipeline was stopped; create a new one")
        if self._running:
            return
        self._running = True
        for stage, count in self._workers_per_stage.items():
            for i in range(count):
                self._workers.append(asyncio.create_task(self._worker(stage), name=f"{stage}-worker-{i}"))
        self._janitor = asyncio.create_task(self._watch_deadlines(), name="pipeline-deadlines")

    async def stop(self, reason: str = "service shutdown") -> None:
        """Cancel every live job (releasing its resources), then stop the workers."""
        if self._closed:
            return
        self._closed = True
        await asyncio.gather(
            *(self._cancel(job_id, reason, as_timeout=False) for job_id in list(self._live)),
            return_exceptions=True,
        )
        for task in [*self._workers, *([self._janitor] if self._janitor else [])]:
            task.cancel()
        await asyncio.gather(
            *self._workers, *([self._janitor] if self._janitor else []), return_exceptions=True
        )
        if self._releases:
            await asyncio.gather(*self._releases, return_exceptions=True)
        self._workers.clear()
        self._running = False
        await self.executor.close()

    @property
    def running(self) -> bool:
        return self._running and not self._closed

    # -- submission -------------------------------------------------------------------------
    def submit(self, specs: Sequence[JobSpec]) -> list[str]:
        """Accept all jobs or none (unknown task, duplicate id, or no room: nothing queued)."""
        if self._closed:
            raise PipelineClosedError("pipeline is stopped")
        cfg = self.config
        jobs: list[tuple[Job, JobRecord]] = []
        seen: set[str] = set()
        for spec in specs:
            task = self.handlers.resolve(spec.task, spec.instance)
            job_id = spec.id or new_job_id()
            if job_id in seen or job_id in self._live or job_id in self._store:
                raise DuplicateJobError(f"job id {job_id!r} is already in use")
            seen.add(job_id)
            job = Job(
                id=job_id,
                task=task,
                instance=spec.instance,
                sampling_params=spec.sampling_params,
                priority=spec.priority,
                active_time_s=spec.budget.active_time_s or cfg.active_time_s,
                wall_time_s=spec.budget.wall_time_s or cfg.wall_time_s,
                group_id=spec.group_id,
                metadata=spec.metadata,
            )
            jobs.append((job, JobRecord(job, self.handlers.get(task))))
        queue = self._queues[Stage.INIT]
        if len(jobs) > queue.free():
            raise QueueFullError(
                f"{len(jobs)} jobs do not fit: {queue.free()} of {queue.maxsize} queue slots free; retry later"
            )
        for job, rec in jobs:
            self._store.forget_tombstone(job.id)
            self._live[job.id] = rec
            queue.put_nowait(job.id, rec, job.priority)
        self.submitted_total += len(jobs)
        return [job.id for job, _ in jobs]

    # -- queries ----------------------------------------------------------------------------
    def get(self, job_id: str, *, mark_fetched: bool = True) -> JobResult:
        rec = self._live.get(job_id)
        if rec is not None:
            return rec.snapshot()
        result = self._store.get(job_id, mark_fetched=mark_fetched)
        if result is None:
            raise JobNotFoundError(job_id, evicted=self._store.was_evicted(job_id))
        return result

    def missing_reason(self, job_id: str) -> str | None:
        """None if the job is known, else why it cannot be fetched."""
        if job_id in self._live or job_id in self._store:
            return None
        return str(JobNotFoundError(job_id, evicted=self._store.was_evicted(job_id)))

    async def as_completed(
        self, job_ids: Iterable[str], timeout: float | None = None
    ) -> AsyncIterator[JobResult]:
        """Yield each known job's result as it reaches a terminal state (finished ones first)."""
        inbox: asyncio.Queue[JobResult] = asyncio.Queue()
        watched: list[JobRecord] = []
        ready: list[JobResult] = []
        for job_id in dict.fromkeys(job_ids):
            rec = self._live.get(job_id)
            if rec is not None:
                rec.watchers.append(inbox)
                watched.append(rec)
            elif (result := self._store.get(job_id)) is not None:
                ready.append(result)
        try:
            for result in ready:
                yield result
            deadline = None if timeout is None else time.monotonic() + timeout
            for _ in range(len(watched)):
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return
                try:
                    result = await asyncio.wait_for(inbox.get(), left)
                except TimeoutError:
                    return
                self._store.get(result.id)  # mark fetched: it was delivered
                yield result
        finally:
            for rec in watched:
                with contextlib.suppress(ValueError):
                    rec.watchers.remove(inbox)

    async def wait(
        self, job_ids: Sequence[str], timeout: float | None = None, mode: Literal["all", "any"] = "all"
    ) -> tuple[list[JobResult], list[str]]:
        """Long-poll: finished results and the ids still pending when `timeout` ran out."""
        wanted = [i for i in dict.fromkeys(job_ids) if self.missing_reason(i) is None]
        results: list[JobResult] = []
        async for result in self.as_completed(wanted, timeout):
            results.append(result)
            if mode == "any":
                break
        done = {r.id for r in results}
        if mode == "any":  # everything else that is already finished comes along too
            for job_id in wanted:
                if job_id not in done and job_id in self._store:
                    results.append(self.get(job_id))
                    done.add(job_id)
        return results, [i for i in wanted if i not in done]

    def status(self) -> PipelineStatus:
        return PipelineStatus(
            running=self.running,
            stages={
                stage: StageStatus(
                    workers=self._workers_per_stage[stage],
                    queued=len(self._queues[stage]),
                    queue_capacity=self._queues[stage].maxsize,
                    in_flight=self._in_flight[stage],
                )
                for stage in Stage
            },
            live_jobs=len(self._live),
            retained_results=len(self._store),
            submitted_total=self.submitted_total,
            finished_total=dict(self.finished_total),
            critical_errors_total=dict(self.critical_errors_total),
            evicted_total=self._store.evicted_total,
            infra_retries_total=self.infra_retries_total,
            nodes=self.executor.nodes(),
        )

    def live_ids(self) -> list[str]:
        return list(self._live)

    # -- cancellation -----------------------------------------------------------------------
    async def cancel(self, job_id: str, reason: str = "cancelled by request") -> JobResult:
        """Cancel a job at whatever stage it is in; returns once its resources are released
        (or `cancel_wait_s` passed). Finished jobs are returned unchanged."""
        await self._cancel(job_id, reason, as_timeout=False)
        return self.get(job_id, mark_fetched=False)

    async def cancel_many(self, job_ids: Iterable[str], reason: str = "cancelled by request") -> None:
        await asyncio.gather(*(self._cancel(i, reason, as_timeout=False) for i in dict.fromkeys(job_ids)))

    async def _cancel(self, job_id: str, reason: str, *, as_timeout: bool) -> None:
        rec = self._live.get(job_id)
        if rec is None:
            if self.missing_reason(job_id) is not None:
                raise JobNotFoundError(job_id, evicted=self._store.was_evicted(job_id))
            return
        if rec.cancel_reason is None:
            rec.cancel_reason, rec.cancel_is_timeout = reason, as_timeout
            if self._queues[rec.stage].remove(job_id) is not None:
                # Waiting in a queue: no stage task to interrupt; clean up in a task of its own
                # so concurrent cancels (and shutdown) can wait on the same thing.
                rec.task = asyncio.create_task(self._finish_cancelled(rec), name=f"cancel-{job_id}")
            elif rec.task is not None and not rec.task.done():
                rec.task.cancel()
        if rec.task is not None and not rec.task.done():
            await asyncio.wait({rec.task}, timeout=self.config.cancel_wait_s)

    async def _finish_cancelled(self, rec: JobRecord) -> None:
        await self._release(rec)
        if rec.cancel_is_timeout:
            self._finish(rec, JobState.FAILED, critical_error="timeout", error=rec.cancel_reason)
        else:
            self._finish(rec, JobState.CANCELLED)

    async def _watch_deadlines(self) -> None:
        """Expire jobs whose wall deadline passes while they wait (stages enforce it themselves)."""
        while True:
            await asyncio.sleep(self.config.deadline_check_s)
            now = time.monotonic()
            expired = [
                rec
                for rec in self._live.values()
                if rec.deadline is not None
                and rec.waiting
                and rec.cancel_reason is None
                and rec.deadline <= now
            ]
            for rec in expired:
                msg = f"wall deadline of {rec.job.wall_time_s}s passed while waiting for {rec.stage}"
                task = asyncio.create_task(self._cancel(rec.id, msg, as_timeout=True))
                self._background.add(task)
                task.add_done_callback(self._background.discard)

    # -- stage execution --------------------------------------------------------------------
    async def _worker(self, stage: Stage) -> None:
        queue = self._queues[stage]
        while True:
            _, rec = await queue.get()
            # Eager start: the stage's try/finally is entered before anyone can cancel it (a
            # task cancelled before its first step would skip its body, and its cleanup).
            task = asyncio.Task(
                self._execute(rec, stage),
                loop=asyncio.get_running_loop(),
                name=f"{stage}-{rec.id}",
                eager_start=True,
            )
            rec.task = task
            try:
                # Waiting on the task (not awaiting it) keeps its cancellation from hitting us.
                await asyncio.wait({task})
            except asyncio.CancelledError:
                if not task.done():
                    rec.cancel_reason = rec.cancel_reason or "service shutdown"
                    task.cancel()
                    await asyncio.wait({task}, timeout=self.config.cancel_wait_s)
                raise

    async def _execute(self, rec: JobRecord, stage: Stage) -> None:
        if stage is Stage.INIT and not await self._wait_for_capacity(rec):
            return
        rec.begin_active(stage)
        self._in_flight[stage] += 1
        counted = True
        failure: tuple[CriticalError, str, str | None] | None = None
        try:
            left = rec.time_left()
            if rec.cancel_reason is not None:
                raise asyncio.CancelledError
            if left <= 0:
                raise _BudgetSpentError
            timer = asyncio.timeout(left)
            try:
                async with timer:
                    await self._stage_body(rec, stage)
            except TimeoutError as exc:
                if not timer.expired():
                    raise  # the handler's own timeout error: a stage failure
                raise _BudgetSpentError from exc
            if timer.expired():  # the handler swallowed the cancellation
                raise _BudgetSpentError
            if rec.cancel_reason is not None:  # likewise for a cancel
                raise asyncio.CancelledError
            self._count_stage_end(rec, stage)
            counted = False
            if stage is Stage.RUN and not rec.handler.eval_needs_run_state:
                await self._release(rec)
            if stage is Stage.EVAL:
                await self._release(rec)
                self._finish(rec, JobState.DONE)
                return
            # Hand-off: the time blocked on a full queue is the next stage's queue wait.
            next_stage = _NEXT[stage]
            rec.begin_wait(next_stage)
            await self._queues[next_stage].put(rec.id, rec, rec.job.priority)
            return
        except _BudgetSpentError:
            spent = rec.counted_elapsed()
            over_wall = rec.deadline is not None and time.monotonic() >= rec.deadline
            what = (
                f"wall deadline of {rec.job.wall_time_s}s"
                if over_wall
                else f"active-time budget of {rec.job.active_time_s}s"
            )
            failure = ("timeout", f"{what} exceeded during {stage} (active {spent:.3f}s)", None)
        except InfrastructureError as exc:
            if counted:
                self._count_stage_end(rec, stage)
                counted = False
            with contextlib.suppress(asyncio.CancelledError):
                await self._release(rec)  # the node is gone: this only frees bookkeeping
            if rec.cancel_reason is not None:
                if rec.cancel_is_timeout:
                    self._finish(rec, JobState.FAILED, critical_error="timeout", error=rec.cancel_reason)
                else:
                    self._finish(rec, JobState.CANCELLED)
                return
            if self._retry_elsewhere(rec, stage, exc):
                return
            failure = (stage.critical_error, f"{type(exc).__name__}: {exc}", None)
            rec.mask_sample = True  # the infrastructure failed, not the policy
        except asyncio.CancelledError:
            if counted:
                self._count_stage_end(rec, stage)
                counted = False
            await self._release(rec)
            if rec.cancel_reason is None:  # not ours (event loop shutting down): record and go
                rec.cancel_reason = "interrupted"
                self._finish(rec, JobState.CANCELLED)
                raise
            if rec.cancel_is_timeout:
                self._finish(rec, JobState.FAILED, critical_error="timeout", error=rec.cancel_reason)
            else:
                self._finish(rec, JobState.CANCELLED)
            return
        except Exception as exc:
            failure = (
                stage.critical_error,
                f"{type(exc).__name__}: {exc}",
                traceback.format_exc(),
            )
            if isinstance(exc, RolloutFailure):
                rec.failure = exc.classification()
        finally:
            self._in_flight[stage] -= 1
        # Failure path (kept out of `except` so a cancel during release is handled plainly).
        assert failure is not None
        if counted:
            self._count_stage_end(rec, stage)
        kind, message, tb = failure
        logger.info("job %s failed in %s: %s", rec.id, stage, message)
        with contextlib.suppress(asyncio.CancelledError):
            await self._release(rec)  # a cancel now changes nothing: the job has failed
        self._finish(rec, JobState.FAILED, critical_error=kind, error=message, traceback_text=tb)

    async def _wait_for_capacity(self, rec: JobRecord) -> bool:
        """Wait (as INIT queue time) until the executor can place a job; False if the job was
        cancelled meanwhile (and is finished here: it holds nothing yet)."""
        try:
            await self.executor.wait_for_capacity()
        except asyncio.CancelledError:
            if rec.cancel_reason is None:
                rec.cancel_reason = "interrupted"
                self._finish(rec, JobState.CANCELLED)
                raise
            if rec.cancel_is_timeout:
                self._finish(rec, JobState.FAILED, critical_error="timeout", error=rec.cancel_reason)
            else:
                self._finish(rec, JobState.CANCELLED)
            return False
        return True

    def _retry_elsewhere(self, rec: JobRecord, stage: Stage, exc: InfrastructureError) -> bool:
        """A lost node: put the job back at the front of INIT for a fresh start elsewhere (its
        state went with the node), unless its attempts are spent."""
        if rec.attempts and rec.attempts[-1].lost is None:
            rec.attempts[-1].lost = str(exc)
        else:  # lost before INIT could report where it ran
            rec.attempts.append(Attempt(node=exc.node, stage=stage, lost=str(exc)))
        if self.executor.max_attempts <= len(rec.attempts):
            return False
        logger.info("job %s lost its node during %s (%s); running it again", rec.id, stage, exc)
        rec.restart()
        rec.infra_retries += 1
        self.infra_retries_total += 1
        self._queues[Stage.INIT].put_front(rec.id, rec)
        return True

    async def _stage_body(self, rec: JobRecord, stage: Stage) -> None:
        ex, handler, job = self.executor, rec.handler, rec.job
        if rec.attempts and rec.attempts[-1].lost is None:
            rec.attempts[-1].stage = stage
        if stage is Stage.INIT:
            state = await ex.init(handler, job)
            rec.state, rec.has_state = state, True
            node = ex.node_of(state)
            if node is not None:
                rec.attempts.append(Attempt(node=node, stage=stage))
        elif stage is Stage.RUN:
            rec.trajectory = await ex.run(handler, job, rec.state)
        else:
            assert rec.trajectory is not None
            state = rec.state if handler.eval_needs_run_state else None
            rec.evaluation = await ex.evaluate(handler, job, state, rec.trajectory)

    def _count_stage_end(self, rec: JobRecord, stage: Stage) -> None:
        rec.end_active()
        totals = self.stage_totals
        totals.active_s[stage] += rec.active[stage]
        totals.wait_s[stage] += rec.waits[stage]
        totals.count[stage] += 1

    async def _release(self, rec: JobRecord) -> None:
        """Release the job's state exactly once; every caller waits for the same release.

        Shielded: a cancel arriving mid-release must not leave a sandbox half closed.
        """
        if not rec.has_state:
            return
        if rec.release_task is None:
            rec.release_task = asyncio.create_task(self._do_release(rec), name=f"release-{rec.id}")
            self._releases.add(rec.release_task)
            rec.release_task.add_done_callback(self._releases.discard)
        try:
            await asyncio.shield(rec.release_task)
        except asyncio.CancelledError:
            await asyncio.wait({rec.release_task})
            raise

    async def _do_release(self, rec: JobRecord) -> None:
        started = time.monotonic()
        try:
            await self.executor.release(rec.handler, rec.state)
        except Exception as exc:
            logger.warning("releasing job %s failed: %s", rec.id, exc, exc_info=True)
            rec.report["release_error"] = f"{type(exc).__name__}: {exc}"
        finally:
            rec.state = None
            rec.add_others(time.monotonic() - started)

    def _finish(
        self,
        rec: JobRecord,
        state: JobState,
        *,
        critical_error: CriticalError | None = None,
        error: str | None = None,
        traceback_text: str | None = None,
    ) -> None:
        if rec.id not in self._live:
            return
        rec.begin_wait(rec.stage)  # close the open segment
        result = rec.result(state, critical_error=critical_error, error=error, traceback=traceback_text)
        del self._live[rec.id]
        self._store.put(result)
        self.finished_total[state] += 1
        if critical_error:
            self.critical_errors_total[critical_error] = self.critical_errors_total.get(critical_error, 0) + 1
        for inbox in rec.watchers:
            inbox.put_nowait(result)
        rec.watchers.clear()


class _BudgetSpentError(Exception):
    """Internal: the job's active budget or wall deadline ran out inside a stage."""
