# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""How a job moves through the stages, shared by the pipeline's workers.

`StageRunner` is the half of `Pipeline` that acts on one job: a worker pops it and runs one
stage inside the job's time budget, hands it to the next stage's queue (waiting while that
queue is full), and ends it (done, failed, cancelled, or sent back to INIT when its node was
lost), always releasing its state exactly once. `Pipeline` (engine) owns the state this reads
and adds submission, queries, cancellation and shutdown.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import traceback

from nemo_gym_prorl.latency import wait_for_calm_loop
from nemo_gym_prorl.llm.slot_wait import SlotWaitClock, listen
from nemo_gym_prorl.pipeline.config import PipelineConfig
from nemo_gym_prorl.pipeline.executor import InfrastructureError, StageExecutor
from nemo_gym_prorl.pipeline.handler import RolloutFailure
from nemo_gym_prorl.pipeline.job import Attempt, CriticalError, JobState, Stage
from nemo_gym_prorl.pipeline.journal_hook import JobJournal
from nemo_gym_prorl.pipeline.policy_clock import PolicyClock
from nemo_gym_prorl.pipeline.queue import StageQueue
from nemo_gym_prorl.pipeline.record import JobRecord
from nemo_gym_prorl.pipeline.status import StageTotals
from nemo_gym_prorl.pipeline.store import ResultStore

logger = logging.getLogger(__name__)

_NEXT = {Stage.INIT: Stage.RUN, Stage.RUN: Stage.EVAL}


class StageRunner:
    """Runs, hands off, ends and releases jobs; the attributes are set by `Pipeline.__init__`."""

    config: PipelineConfig
    executor: StageExecutor
    stage_totals: StageTotals
    finished_total: dict[JobState, int]
    critical_errors_total: dict[str, int]
    infra_retries_total: int
    stale_total: dict[str, int]
    policy_clock: PolicyClock
    journal: JobJournal | None
    _queues: dict[Stage, StageQueue[JobRecord]]
    _live: dict[str, JobRecord]
    _store: ResultStore
    _in_flight: dict[Stage, int]
    _releases: set[asyncio.Task[None]]

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
            # Waiting for a model slot is the service's backpressure, not the job's work: the
            # budget's clock stops meanwhile (the wall deadline still stands).
            clock = SlotWaitClock(on_began=rec.begin_model_wait, on_ended=rec.end_model_wait)
            try:
                with listen(clock):
                    async with timer:
                        with clock.pausing(timer, rec.time_left, rec.deadline):
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
                if self._rerun_if_stale(rec):
                    return
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
                self._end_cancelled(rec)
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
                self._end_interrupted(rec)
                raise
            self._end_cancelled(rec)
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
            # A burst of rollouts starts no faster than the event loop can drive them.
            await wait_for_calm_loop(self.config.init_pace_lag_s)
            # Last, so nothing awaits between finding a free slot and INIT taking it: a wait
            # between would let other jobs take it, and this job would then wait for one
            # inside INIT, charged to its budget as active time.
            await self.executor.wait_for_capacity()
        except asyncio.CancelledError:
            if rec.cancel_reason is None:
                self._end_interrupted(rec)
                raise
            self._end_cancelled(rec)
            return False
        return True

    def _rerun_if_stale(self, rec: JobRecord) -> bool:
        """Judge a finished rollout's staleness against the trainer's current version; past
        `max_staleness`, flag it, drop it (masked: no trainer learns from it, nothing is lost),
        or put it back at the front of INIT to run on the current policy (True)."""
        bound = self.config.staleness
        versions = rec.trajectory.policy_versions if rec.trajectory is not None else []
        verdict = bound.judge(self.policy_clock.current(), versions)
        rec.staleness, rec.stale = verdict.staleness, verdict.action != "keep"
        if verdict.action == "keep":
            return False
        self.stale_total[verdict.action] = self.stale_total.get(verdict.action, 0) + 1
        if verdict.action == "rerun" and rec.stale_reruns < bound.max_reruns:
            logger.info("job %s is %s versions stale; running it again", rec.id, verdict.staleness)
            rec.restart()
            rec.stale_reruns += 1
            self._queues[Stage.INIT].put_front(rec.id, rec)
            return True
        if verdict.action != "flag":  # dropped, or re-run as often as allowed
            rec.mask_sample = True
            rec.report["stale"] = f"{verdict.staleness} versions behind the trainer: not trained on"
        return False

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

    async def _finish_cancelled(self, rec: JobRecord) -> None:
        await self._release(rec)
        self._end_cancelled(rec)

    def _end_cancelled(self, rec: JobRecord) -> None:
        """A cancelled job's end: a cancel for time fails it as a timeout, any other cancels it."""
        if rec.cancel_is_timeout:
            self._finish(rec, JobState.FAILED, critical_error="timeout", error=rec.cancel_reason)
        else:
            self._finish(rec, JobState.CANCELLED)

    def _end_interrupted(self, rec: JobRecord) -> None:
        """Cancelled by no one of ours (the event loop shutting down): record it before going."""
        rec.cancel_reason = "interrupted"
        self._finish(rec, JobState.CANCELLED)

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
        as_json = self._store.put(result)
        if self.journal is not None:
            self.journal.settled(result, as_json)
        self.finished_total[state] += 1
        if critical_error:
            self.critical_errors_total[critical_error] = self.critical_errors_total.get(critical_error, 0) + 1
        for inbox in rec.watchers:
            inbox.put_nowait(result)
        rec.watchers.clear()


class _BudgetSpentError(Exception):
    """Internal: the job's active budget or wall deadline ran out inside a stage."""
