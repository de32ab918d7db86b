# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The pipeline's mutable bookkeeping for one live job: where it is and where its time went."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from nemo_gym_prorl.pipeline.handler import RolloutHandler
from nemo_gym_prorl.pipeline.job import (
    Attempt,
    CriticalError,
    Evaluation,
    FailureClass,
    Job,
    JobResult,
    JobState,
    Stage,
    Timing,
    Trajectory,
)
from nemo_gym_prorl.server_paths import redact_server_paths

_STAGE_STATE = {Stage.INIT: JobState.INIT, Stage.RUN: JobState.RUN, Stage.EVAL: JobState.EVAL}


class JobRecord:
    """Time is split into segments: waiting for a stage, active in it, waiting inside it for a
    model slot (`model_wait`: backpressure, not the job's work), or releasing ("others").

    Plain attributes, not a pydantic model: thousands of these are updated on every step.
    """

    def __init__(self, job: Job, handler: RolloutHandler) -> None:
        now = time.monotonic()
        self.job = job
        self.handler = handler
        self.submitted_at = time.time()
        self.t_submit = now
        self.deadline = now + job.wall_time_s if job.wall_time_s is not None else None
        self.stage = Stage.INIT
        self.waiting = True
        self.mark = now  # start of the current segment
        self.active = dict.fromkeys(Stage, 0.0)
        self.waits = dict.fromkeys(Stage, 0.0)
        self.others = 0.0
        self.model_wait = 0.0
        self.model_waiting = False  # inside a stage, its model calls wait for a free slot
        # Stage products.
        self.state: Any = None
        self.has_state = False
        self.release_task: asyncio.Task[None] | None = None
        self.trajectory: Trajectory | None = None
        self.evaluation: Evaluation | None = None
        self.report: dict[str, Any] = {}
        self.attempts: list[Attempt] = []
        self.infra_retries = 0
        self.resumed = 0  # runs lost with a dead service before this one
        self.mask_sample = False
        self.staleness: int | None = None
        self.stale = False
        self.stale_reruns = 0
        self.failure: FailureClass | None = None  # the handler's `RolloutFailure`, classified
        # Control.
        self.task: asyncio.Task[None] | None = None  # the stage task, or the cancel cleanup
        self.cancel_reason: str | None = None
        self.cancel_is_timeout = False
        self.watchers: list[asyncio.Queue[JobResult]] = []

    @property
    def id(self) -> str:
        return self.job.id

    # -- segments ---------------------------------------------------------------------------
    def _close_segment(self, now: float) -> None:
        spent = max(0.0, now - self.mark)
        if self.model_waiting and not self.waiting:
            self.model_wait += spent
        else:
            (self.waits if self.waiting else self.active)[self.stage] += spent
        self.mark = now

    def begin_wait(self, stage: Stage) -> None:
        self._close_segment(time.monotonic())
        self.stage, self.waiting = stage, True

    def begin_active(self, stage: Stage) -> None:
        self._close_segment(time.monotonic())
        self.stage, self.waiting, self.model_waiting = stage, False, False

    def begin_model_wait(self) -> None:
        """The stage's model calls wait for a free backend slot: the clock of its budget stops."""
        self._close_segment(time.monotonic())
        self.model_waiting = True

    def end_model_wait(self) -> None:
        self._close_segment(time.monotonic())
        self.model_waiting = False

    def end_active(self) -> None:
        """Close the active segment; what follows (release) is counted as `others`."""
        now = time.monotonic()
        self._close_segment(now)
        self.waiting = True  # parked: not counted as active any more

    def add_others(self, seconds: float) -> None:
        self.others += seconds
        self.mark += seconds  # the release interval is not also a wait

    def restart(self) -> None:
        """Forget a lost attempt's products so the job can start over from INIT.

        The active time spent on the lost node becomes INIT wait: the job was waiting for a
        working node, and the policy must not lose its budget to the infrastructure.
        """
        self._close_segment(time.monotonic())
        lost = sum(self.active.values())
        self.active = dict.fromkeys(Stage, 0.0)
        self.waits[Stage.INIT] += lost
        self.state, self.has_state, self.release_task = None, False, None
        self.trajectory, self.evaluation = None, None
        self.stage, self.waiting = Stage.INIT, True

    def counted_elapsed(self) -> float:
        now = time.monotonic()
        running = 0.0 if self.waiting or self.model_waiting else max(0.0, now - self.mark)
        return sum(self.active.values()) + running

    def time_left(self) -> float:
        """Seconds this job may still spend in stages: active budget and wall deadline."""
        left = self.job.active_time_s - self.counted_elapsed()
        if self.deadline is not None:
            left = min(left, self.deadline - time.monotonic())
        return left

    # -- views ------------------------------------------------------------------------------
    def timing(self, *, timeout_triggered: bool = False) -> Timing:
        now = time.monotonic()
        waits = dict(self.waits)
        active = dict(self.active)
        open_spent = max(0.0, now - self.mark)
        model_wait = self.model_wait
        if self.model_waiting and not self.waiting:
            model_wait += open_spent
        else:
            (waits if self.waiting else active)[self.stage] += open_spent
        return Timing(
            init_time=active[Stage.INIT],
            run_time=active[Stage.RUN],
            eval_time=active[Stage.EVAL],
            init_wait=waits[Stage.INIT],
            run_wait=waits[Stage.RUN],
            eval_wait=waits[Stage.EVAL],
            others_time=self.others,
            model_wait_s=model_wait,
            counted_elapsed=sum(active.values()),
            total_elapsed=now - self.t_submit,
            timeout_triggered=timeout_triggered,
        )

    def live_state(self) -> JobState:
        if self.stage is Stage.INIT and self.waiting:
            return JobState.QUEUED
        return _STAGE_STATE[self.stage]

    def result(
        self,
        state: JobState,
        *,
        critical_error: CriticalError | None = None,
        error: str | None = None,
        traceback: str | None = None,
    ) -> JobResult:
        job = self.job
        evaluation = self.evaluation
        instance_id = job.instance.get("instance_id")
        # A result is what every door answers for the job: the exception texts it carries keep
        # what failed and lose the server's paths (the stage's log line keeps them).
        report = {**(evaluation.report if evaluation else {}), **self.report}
        if isinstance(report.get("detail"), str):
            report["detail"] = redact_server_paths(report["detail"])
        failure = self.failure if state is JobState.FAILED else None
        if failure is not None:
            failure = failure.model_copy(update={"message": redact_server_paths(failure.message)})
        return JobResult(
            id=job.id,
            task=job.task,
            state=state,
            waiting=self.waiting and not state.terminal,
            group_id=job.group_id,
            priority=job.priority,
            metadata=job.metadata,
            instance_id=str(instance_id) if instance_id is not None else None,
            submitted_at=self.submitted_at,
            digest=job.digest,
            finished_at=time.time() if state.terminal else None,
            reward=evaluation.reward if evaluation else None,
            reward_components=evaluation.reward_components if evaluation else {},
            resolved=evaluation.resolved if evaluation else None,
            trajectory=self.trajectory,
            report=report,
            critical_error=critical_error,
            error=redact_server_paths(error) if error else error,
            traceback=redact_server_paths(traceback) if traceback else traceback,
            cancel_reason=self.cancel_reason if state is JobState.CANCELLED else None,
            mask_sample=self.mask_sample,
            failure=failure,
            attempts=[a.model_copy() for a in self.attempts],
            infra_retries=self.infra_retries,
            resumed=self.resumed,
            policy_versions=list(self.trajectory.policy_versions) if self.trajectory else [],
            staleness=self.staleness,
            stale=self.stale,
            stale_reruns=self.stale_reruns,
            timing=self.timing(timeout_triggered=critical_error == "timeout"),
        )

    def snapshot(self) -> JobResult:
        return self.result(self.live_state())
