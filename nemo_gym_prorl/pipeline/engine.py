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

This module is the pipeline's public face; `stages` runs the jobs, `status` describes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Literal

from nemo_gym_prorl.pipeline.config import PipelineConfig
from nemo_gym_prorl.pipeline.executor import InProcessExecutor, StageExecutor
from nemo_gym_prorl.pipeline.handler import HandlerRegistry
from nemo_gym_prorl.pipeline.job import Job, JobResult, JobSpec, JobState, Stage, new_job_id
from nemo_gym_prorl.pipeline.journal_hook import JobJournal
from nemo_gym_prorl.pipeline.policy_clock import PolicyClock
from nemo_gym_prorl.pipeline.queue import QueueFullError, StageQueue
from nemo_gym_prorl.pipeline.record import JobRecord
from nemo_gym_prorl.pipeline.stages import StageRunner
from nemo_gym_prorl.pipeline.status import PipelineStatus, StageStatus, StageTotals
from nemo_gym_prorl.pipeline.store import ResultStore

__all__ = ["DuplicateJobError", "Pipeline", "PipelineClosedError", "PipelineStatus", "StageStatus"]


class DuplicateJobError(ValueError):
    pass


class PipelineClosedError(RuntimeError):
    pass


class Pipeline(StageRunner):
    """Submission, queries, cancellation and shutdown; `StageRunner` moves each job through the stages."""

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
        # With a journal, results evicted from memory are spilled (read back from it when
        # fetched); results restored from a journal at start-up are spilled even before it is set.
        self._restoring = False
        self._store = ResultStore(
            cfg.max_retained_results,
            cfg.max_evicted_ids,
            cfg.max_retained_bytes,
            spills=lambda: self.journal is not None or self._restoring,
        )
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
        self.stale_total: dict[str, int] = {}  # verdict -> rollouts past max_staleness
        self.policy_clock = PolicyClock()  # the stack points it at its pool's published version
        self.journal: JobJournal | None = None  # told of every accepted job and settled result
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
        await self.handlers.aclose()

    @property
    def running(self) -> bool:
        return self._running and not self._closed

    # -- submission -------------------------------------------------------------------------
    def submit(self, specs: Sequence[JobSpec], *, resumed: int = 0) -> list[str]:
        """Accept all jobs or none (unknown task, duplicate id, or no room: nothing queued).

        `resumed`: the jobs were accepted by a service that died with them in flight and are taken
        back from its journal; they were admitted once, so they go ahead of new jobs, past the
        queue's bound, and their results count the lost runs."""
        if self._closed:
            raise PipelineClosedError("pipeline is stopped")
        cfg = self.config
        jobs: list[tuple[Job, JobRecord]] = []
        ids: list[str] = []
        seen: set[str] = set()
        for spec in specs:
            task = self.handlers.resolve(spec.task, spec.instance)
            job_id = spec.id or new_job_id()
            if job_id in seen:
                raise DuplicateJobError(f"job id {job_id!r} appears twice in one submit")
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
                policy_version=spec.policy_version,
            )
            ids.append(job_id)
            if self._already_has(job):  # a client's retry of a submit whose answer it lost
                continue
            jobs.append((job, JobRecord(job, self.handlers.get(task))))
        queue = self._queues[Stage.INIT]
        if not resumed and len(jobs) > queue.free():
            raise QueueFullError(
                f"{len(jobs)} jobs do not fit: {queue.free()} of {queue.maxsize} queue slots free; retry later"
            )
        for job, rec in reversed(jobs) if resumed else jobs:  # put_front: the first ends up first
            self.policy_clock.observe(job.policy_version)
            self._store.forget_tombstone(job.id)
            self._live[job.id] = rec
            if resumed:
                rec.resumed = resumed
                queue.put_front(job.id, rec)
            else:
                queue.put_nowait(job.id, rec, job.priority)
        if self.journal is not None and jobs:
            self.journal.accepted([job for job, _ in jobs], resumed=resumed)
        self.submitted_total += len(jobs)
        return ids

    def restore_results(self, results: Iterable[JobResult], evicted: Iterable[str] = ()) -> None:
        """Results a dead service finished (oldest first), served again as if it never died, and
        the ids of older ones, left in the journal: served from it once the pipeline has it
        (`journal`), answered as evicted otherwise."""
        for job_id in evicted:
            self._store.remember_evicted(job_id, spilled=True)
        self._restoring = True  # all came from a journal: any pushed out now stays there
        try:
            for result in results:
                self._store.put(result)
        finally:
            self._restoring = False

    def _already_has(self, job: Job) -> bool:
        """Whether this id is already the same job (live or finished); an id already used by a
        different job is refused: ids are the client's, and one must not stand for two jobs."""
        live = self._live.get(job.id)
        digest = live.job.digest if live is not None else self._store.digest(job.id)
        if digest is None and (tomb := self._store.tombstone(job.id)) is not None and tomb.spilled:
            digest = tomb.digest  # finished and still served from the journal: the same job
        if digest is None:
            return False
        if digest != job.digest:
            raise DuplicateJobError(f"job id {job.id!r} is already in use by a different job")
        return True

    # -- queries ----------------------------------------------------------------------------
    def get(self, job_id: str, *, mark_fetched: bool = True) -> JobResult:
        rec = self._live.get(job_id)
        if rec is not None:
            return rec.snapshot()
        result = self._store.get(job_id, mark_fetched=mark_fetched)
        if result is None:
            raise self._store.not_found(job_id)
        return result

    def held_json(self, job_id: str) -> bytes | None:
        """A finished result's JSON as the result store holds it (None: live, or not held):
        what a door answering with the result can send without serialising it again."""
        return self._store.get_json(job_id, mark_fetched=False)

    async def fetch(self, job_id: str, *, mark_fetched: bool = True) -> JobResult:
        """`get`, and a result spilled out of memory read back from the journal (every door that
        answers a client with a finished result fetches it so)."""
        rec = self._live.get(job_id)
        if rec is not None:
            return rec.snapshot()
        result = self._store.get(job_id, mark_fetched=mark_fetched)
        if result is None:
            result = await self._read_spilled(job_id)
        if result is None:
            raise self._store.not_found(job_id)
        return result

    async def _read_spilled(self, job_id: str) -> JobResult | None:
        if self.journal is None or not self._store.spilled(job_id):
            return None
        result = await self.journal.result(job_id)
        if result is None:
            self._store.mark_lost(job_id)  # pruned from the journal since: 410 from now on
        return result

    def missing_reason(self, job_id: str) -> str | None:
        """None if the job is known (live, held, or spilled to the journal), else why it cannot be
        fetched."""
        if job_id in self._live or job_id in self._store:
            return None
        if self.journal is not None and self._store.spilled(job_id):
            return None
        return str(self._store.not_found(job_id))

    async def as_completed(
        self, job_ids: Iterable[str], timeout: float | None = None
    ) -> AsyncIterator[JobResult]:
        """Yield each known job's result as it reaches a terminal state (finished ones first)."""
        inbox: asyncio.Queue[JobResult] = asyncio.Queue()
        watched: list[JobRecord] = []
        ready: list[JobResult] = []
        spilled: list[str] = []
        for job_id in dict.fromkeys(job_ids):
            rec = self._live.get(job_id)
            if rec is not None:
                rec.watchers.append(inbox)
                watched.append(rec)
            elif (result := self._store.get(job_id)) is not None:
                ready.append(result)
            elif self._store.spilled(job_id):
                spilled.append(job_id)
        try:
            for result in ready:
                yield result
            for job_id in spilled:  # read back one at a time: each may be megabytes
                if (result := await self._read_spilled(job_id)) is not None:
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
                self._store.get_json(result.id)  # mark fetched (it was delivered), parsing nothing
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
                if job_id in done or job_id in self._live:
                    continue
                held = self._store.get(job_id)
                if held is None:
                    held = await self._read_spilled(job_id)
                if held is not None:
                    results.append(held)
                    done.add(job_id)
        # A spilled result the journal no longer held is neither done nor pending: it is missing.
        return results, [i for i in wanted if i not in done and self.missing_reason(i) is None]

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
            retained_bytes=self._store.bytes,
            max_retained_results=self._store.max_results,
            max_retained_bytes=self._store.max_bytes,
            submitted_total=self.submitted_total,
            finished_total=dict(self.finished_total),
            critical_errors_total=dict(self.critical_errors_total),
            evicted_total=self._store.evicted_total,
            spilled_total=self._store.spilled_total,
            infra_retries_total=self.infra_retries_total,
            stale_total=dict(self.stale_total),
            policy_version=self.policy_clock.current(),
            nodes=self.executor.nodes(),
        )

    def live_ids(self) -> list[str]:
        return list(self._live)

    # -- cancellation -----------------------------------------------------------------------
    async def cancel(self, job_id: str, reason: str = "cancelled by request") -> JobResult:
        """Cancel a job at whatever stage it is in; returns once its resources are released
        (or `cancel_wait_s` passed). Finished jobs are returned unchanged."""
        await self._cancel(job_id, reason, as_timeout=False)
        return await self.fetch(job_id, mark_fetched=False)

    async def cancel_many(self, job_ids: Iterable[str], reason: str = "cancelled by request") -> None:
        await asyncio.gather(*(self._cancel(i, reason, as_timeout=False) for i in dict.fromkeys(job_ids)))

    async def _cancel(self, job_id: str, reason: str, *, as_timeout: bool) -> None:
        rec = self._live.get(job_id)
        if rec is None:
            if self.missing_reason(job_id) is not None:
                raise self._store.not_found(job_id)
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
