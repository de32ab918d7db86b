# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""DAPO dynamic sampling with asynchronous replenishment, on top of the rollout pipeline.

A trainer asks for B informative groups of G samples. The scheduler keeps up to M prompts in
flight (M*G jobs in the pipeline), groups results by prompt, judges each complete group
(informative, uniform, or failed), and starts a new prompt as soon as a slot frees: a slow
group never holds back the others, and a uniform group is replaced the moment it is known
(NeMo RL's trainer-side dynamic sampling instead generates a whole batch, waits for its slowest
rollout, filters, and repeats).

Once B informative groups are out, the jobs still running are either cancelled (`on_ready:
cancel`: their finished partial-group rollouts are thrown away and counted) or carried over to
the next batch (`carry_over`, the default): they keep running, their finished rollouts are kept,
queued ones are re-queued at `carry_priority` so they run before the next batch's new prompts,
and groups completed in between are delivered first when the next batch starts. With carry-over
no finished rollout is ever discarded at a batch boundary; `BatchStats.discarded_finished_rollouts`
proves it.

Infrastructure failures (FAILED jobs, `mask_sample`, cancellations the scheduler did not ask
for) are never read as zero rewards: the sample is retried (`max_sample_retries`, at carry
priority); if it still fails the group is failed (`on_sample_failure: fail_group`) or judged on
its valid samples with the failed one masked (`mask`). A batch stops with status "failed" after
`max_failed_groups` failed groups, so a broken backend cannot silently eat the dataset.

One batch at a time per scheduler; the scheduler owns its jobs (ids `<scheduler>-<n>-s<k>-a<i>`).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from nemo_gym_prorl.pipeline.engine import Pipeline
from nemo_gym_prorl.pipeline.groups import (
    GroupResult,
    GroupStatus,
    UniformRule,
    infrastructure_failure,
    judge,
)
from nemo_gym_prorl.pipeline.job import Budget, JobResult, JobSpec, JobState
from nemo_gym_prorl.pipeline.prompt_source import PromptRow, PromptSource
from nemo_gym_prorl.pipeline.queue import QueueFullError
from nemo_gym_prorl.pipeline.store import JobNotFoundError

# How long to wait before retrying a submission the pipeline refused for lack of queue room.
_QUEUE_FULL_BACKOFF_S = 0.05


class DapoConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    group_size: int = Field(8, ge=1, le=1024, description="G: samples per prompt.")
    batch_groups: int = Field(16, ge=1, le=100_000, description="B: informative groups per batch (default).")
    max_prompts_in_flight: int = Field(32, ge=1, le=100_000, description="M: prompts running at once.")
    uniform: UniformRule = Field(default_factory=UniformRule)
    on_ready: Literal["carry_over", "cancel"] = Field(
        "carry_over", description="What happens to in-flight jobs once B groups are ready."
    )
    priority: int = Field(0, ge=-1000, le=1000, description="Priority of new prompts' jobs.")
    carry_priority: int = Field(
        100, ge=-1000, le=1000, description="Priority of carried-over and retried jobs (run first)."
    )
    max_sample_retries: int = Field(2, ge=0, le=100, description="Retries of an infrastructure failure.")
    on_sample_failure: Literal["fail_group", "mask"] = Field(
        "fail_group",
        description="A sample still failing after retries fails its group, or is masked (the "
        "group is judged on its valid samples; at least 2 needed).",
    )
    max_failed_groups: int | None = Field(
        16, ge=1, description="A batch ends with status 'failed' after this many failed groups."
    )
    dropped_with_samples: bool = Field(
        False,
        description="Send dropped (uniform/failed) groups with their samples, not a summary: for "
        "reporting every rollout (e.g. the demo); costs memory where batch events are retained.",
    )
    task: str | None = Field(None, description="Task handler; default: each row's `data_source`.")
    sampling_params: dict[str, Any] = Field(default_factory=dict)
    budget: Budget = Field(default_factory=Budget)


BatchStatus = Literal["running", "complete", "exhausted", "failed", "cancelled"]


class BatchStats(BaseModel):
    """What one batch cost. `rollouts_spent` counts finished rollouts of the groups judged in
    this batch (retries included) plus those thrown away at its end; divided by the informative
    groups it is the price of one useful group."""

    batch_index: int
    requested_groups: int
    status: BatchStatus = "running"
    error: str | None = None
    informative_groups: int = 0
    uniform_groups: int = 0
    failed_groups: int = 0
    carried_groups_delivered: int = Field(0, description="Informative groups whose prompt started earlier.")
    prompts_started: int = 0
    rollouts_submitted: int = Field(0, description="Jobs submitted (retries and re-queues included).")
    rollouts_finished: int = Field(0, description="Jobs that ended DONE or FAILED during the batch.")
    retries: int = 0
    rollouts_spent: int = 0
    rollouts_per_informative_group: float | None = None
    discarded_finished_rollouts: int = Field(
        0, description="Finished rollouts thrown away at the batch's end (0 with carry-over)."
    )
    cancelled_rollouts: int = Field(0, description="Unfinished jobs cancelled at the batch's end.")
    carried_prompts: int = Field(0, description="Prompts left running for the next batch.")
    carried_ready_groups: int = Field(
        0, description="Groups judged after B was reached, kept for the next batch."
    )
    carried_finished_rollouts: int = Field(
        0, description="Finished rollouts of carried prompts and ready groups, all kept."
    )
    requeued_jobs: int = Field(0, description="Queued carried jobs re-queued at carry priority.")
    elapsed_s: float = 0.0
    time_to_first_group_s: float | None = None
    source: dict[str, Any] = Field(default_factory=dict)


class BatchEvent(BaseModel):
    """One streamed item: an informative group, a dropped group (summary only), or the end."""

    type: Literal["group", "dropped", "end"]
    group: GroupResult | None = None
    stats: BatchStats | None = None


class BatchFailedError(RuntimeError):
    def __init__(self, stats: BatchStats) -> None:
        super().__init__(f"batch {stats.batch_index} {stats.status}: {stats.error}")
        self.stats = stats


class _TooManyFailuresError(RuntimeError):
    pass


@dataclass
class _Sample:
    index: int
    job_id: str | None = None
    attempt: int = 0
    priority: int = 0
    result: JobResult | None = None
    valid: bool = False
    done: bool = False
    finished: int = 0  # DONE/FAILED rollouts of this sample (all attempts)


@dataclass
class _Prompt:
    seq: int
    group_id: str
    prompt: PromptRow
    started_batch: int
    started_at: float
    samples: list[_Sample]
    failures: list[str] = field(default_factory=list)
    retries: int = 0

    def finished(self) -> int:
        return sum(s.finished for s in self.samples)

    def valid_finished(self) -> int:
        return sum(1 for s in self.samples if s.done and s.valid)

    def live_jobs(self) -> list[_Sample]:
        return [s for s in self.samples if not s.done and s.job_id is not None]


class DapoScheduler:
    def __init__(
        self,
        pipeline: Pipeline,
        source: PromptSource,
        config: DapoConfig | None = None,
        *,
        name: str | None = None,
    ) -> None:
        self.pipeline = pipeline
        self.source = source
        self.config = config or DapoConfig()
        self.id = name or uuid.uuid4().hex[:10]
        self._inbox: asyncio.Queue[JobResult] = asyncio.Queue()
        self._prompts: dict[str, _Prompt] = {}
        self._owner: dict[str, tuple[_Prompt, _Sample]] = {}
        self._ignored: set[str] = set()  # our jobs whose late results no longer matter
        self._pending: deque[GroupResult] = deque()  # judged, not yet delivered
        self._retry: deque[tuple[_Prompt, _Sample]] = deque()  # resubmissions refused (queue full)
        self._next: PromptRow | None = None  # taken from the source, not yet submitted
        self._source_done = False
        self._backoff_until = 0.0
        self._watchers: set[asyncio.Task[None]] = set()
        self._seq = 0
        self._batch_index = 0
        self._active = False
        self._closed = False
        self._inflight_policy: Literal["carry_over", "cancel"] | None = None
        self.current: BatchStats | None = None
        self.history: list[BatchStats] = []
        self.discarded_outside_batches = 0

    # -- public API -------------------------------------------------------------------------
    @property
    def prompts_in_flight(self) -> int:
        return len(self._prompts)

    @property
    def ready_groups(self) -> int:
        """Judged groups waiting to be delivered by the next batch."""
        return len(self._pending)

    def set_inflight_policy(self, policy: Literal["carry_over", "cancel"] | None) -> None:
        """Override `on_ready` for the end of the running batch (e.g. a cancel that drops all)."""
        self._inflight_policy = policy

    async def next_batch(self, groups: int | None = None) -> tuple[list[GroupResult], BatchStats]:
        """Run one batch to its end: the informative groups and the stats. Raises
        BatchFailedError when it failed (exhaustion is not a failure: fewer groups come back)."""
        delivered: list[GroupResult] = []
        stats: BatchStats | None = None
        async for event in self.stream_batch(groups):
            if event.type == "group" and event.group is not None:
                delivered.append(event.group)
            elif event.type == "end":
                stats = event.stats
        assert stats is not None
        if stats.status == "failed":
            raise BatchFailedError(stats)
        return delivered, stats

    async def stream_batch(self, groups: int | None = None) -> AsyncIterator[BatchEvent]:
        """Events as groups complete: `group` (informative), `dropped` (uniform/failed), and a
        final `end` with the stats. Stopping early (aclose, cancel) ends the batch as `cancelled`
        and applies the in-flight policy."""
        if self._closed:
            raise RuntimeError(f"DAPO scheduler {self.id} is closed")
        if self._active:
            raise RuntimeError(f"DAPO scheduler {self.id} already has a batch running")
        self._active = True
        self._batch_index += 1
        want = groups if groups is not None else self.config.batch_groups
        if want < 1:
            self._active = False
            raise ValueError("a batch needs at least one group")
        stats = BatchStats(batch_index=self._batch_index, requested_groups=want)
        self.current = stats
        started = time.monotonic()
        try:
            try:
                self._drain_inbox(stats)
                while stats.informative_groups < want:
                    if self._pending:
                        event = self._account(self._pending.popleft(), stats, started)
                        yield event
                        limit = self.config.max_failed_groups
                        if limit is not None and stats.failed_groups >= limit:
                            raise _TooManyFailuresError(
                                f"{stats.failed_groups} groups failed on infrastructure errors "
                                f"(max_failed_groups={limit}); last: {event.group and event.group.failures[-1:]}"
                            )
                        continue
                    self._fill(stats)
                    if self._idle():
                        stats.status = "exhausted"
                        break
                    result = await self._next_result()
                    if result is not None:
                        self._absorb(result, stats)
                else:
                    stats.status = "complete"
            except (asyncio.CancelledError, GeneratorExit):
                stats.status = "cancelled"
                raise
            except Exception as exc:
                stats.status = "failed"
                stats.error = f"{type(exc).__name__}: {exc}"
            finally:
                await self._end_batch(stats)
                stats.elapsed_s = time.monotonic() - started
                stats.source = self.source.position()
                self.history.append(stats)
            yield BatchEvent(type="end", stats=stats)
        finally:
            self._active = False
            self._inflight_policy = None

    async def close(self, reason: str = "DAPO scheduler closed") -> int:
        """Cancel everything still running; returns how many finished rollouts were thrown
        away (partial groups and judged groups never delivered)."""
        if self._closed:
            return 0
        self._closed = True
        self._drain_inbox(None)
        lost = sum(p.valid_finished() for p in self._prompts.values())
        lost += sum(len(g.samples) for g in self._pending if g.status is GroupStatus.INFORMATIVE)
        await self._cancel_inflight(reason)
        self._pending.clear()
        self._retry.clear()
        for task in self._watchers:
            task.cancel()
        await asyncio.gather(*self._watchers, return_exceptions=True)
        self.discarded_outside_batches += lost
        return lost

    def totals(self) -> dict[str, Any]:
        keys = (
            "informative_groups", "uniform_groups", "failed_groups", "prompts_started",
            "rollouts_submitted", "rollouts_finished", "retries", "rollouts_spent",
            "discarded_finished_rollouts", "cancelled_rollouts", "requeued_jobs",
        )  # fmt: skip
        out: dict[str, Any] = {k: sum(getattr(s, k) for s in self.history) for k in keys}
        out["batches"] = len(self.history)
        out["rollouts_per_informative_group"] = (
            out["rollouts_spent"] / out["informative_groups"] if out["informative_groups"] else None
        )
        out["discarded_outside_batches"] = self.discarded_outside_batches
        return out

    # -- the loop's parts ---------------------------------------------------------------------
    def _idle(self) -> bool:
        """Nothing running, nothing to start, nothing to deliver: the source ran dry."""
        return (
            not self._prompts
            and not self._pending
            and not self._retry
            and self._next is None
            and self._source_done
            and self._inbox.empty()
        )

    async def _next_result(self) -> JobResult | None:
        timeout: float | None = None
        if self._retry or self._next is not None:  # something waits for queue room
            timeout = max(0.0, self._backoff_until - time.monotonic()) or _QUEUE_FULL_BACKOFF_S
        try:
            return await asyncio.wait_for(self._inbox.get(), timeout)
        except TimeoutError:
            return None

    def _drain_inbox(self, stats: BatchStats | None) -> None:
        while not self._inbox.empty():
            self._absorb(self._inbox.get_nowait(), stats)

    def _fill(self, stats: BatchStats) -> None:
        if time.monotonic() < self._backoff_until:
            return
        try:
            self._submit_retries(stats)  # first: each one holds a whole group back
            while len(self._prompts) < self.config.max_prompts_in_flight:
                if self._next is None:
                    if self._source_done:
                        return
                    self._next = self.source.next_prompt()
                    if self._next is None:
                        self._source_done = True
                        return
                self._start(self._next, stats)
                self._next = None
        except QueueFullError:
            self._backoff_until = time.monotonic() + _QUEUE_FULL_BACKOFF_S

    def _submit_retries(self, stats: BatchStats) -> None:
        while self._retry:
            prompt, sample = self._retry[0]
            self._submit(prompt, [sample], self.config.carry_priority, stats)
            self._retry.popleft()

    def _start(self, row: PromptRow, stats: BatchStats) -> None:
        self._seq += 1
        prompt = _Prompt(
            seq=self._seq,
            group_id=f"{self.id}-{self._seq}",
            prompt=row,
            started_batch=self._batch_index,
            started_at=time.monotonic(),
            samples=[_Sample(index=k) for k in range(self.config.group_size)],
        )
        self._submit(prompt, prompt.samples, self.config.priority, stats)  # all G, or none
        self._prompts[prompt.group_id] = prompt
        stats.prompts_started += 1

    def _submit(
        self, prompt: _Prompt, samples: list[_Sample], priority: int, stats: BatchStats | None
    ) -> None:
        cfg = self.config
        specs = []
        for sample in samples:
            job_id = f"{prompt.group_id}-s{sample.index}-a{sample.attempt}"
            if sample.job_id == job_id:  # re-queued, same attempt: needs a fresh id
                job_id += f"-q{priority}"
            specs.append(
                JobSpec(
                    id=job_id,
                    task=cfg.task,
                    instance=prompt.prompt.row,
                    sampling_params=cfg.sampling_params,
                    priority=priority,
                    budget=cfg.budget,
                    group_id=prompt.group_id,
                    metadata={
                        "dapo": {
                            "scheduler": self.id,
                            "group_id": prompt.group_id,
                            "prompt_key": prompt.prompt.key,
                            "sample": sample.index,
                            "attempt": sample.attempt,
                            "batch": self._batch_index,
                        }
                    },
                )
            )
        ids = self.pipeline.submit(specs)
        for sample, job_id in zip(samples, ids, strict=True):
            sample.job_id, sample.priority = job_id, priority
            self._owner[job_id] = (prompt, sample)
        if stats is not None:
            stats.rollouts_submitted += len(ids)
        watcher = asyncio.create_task(self._watch(ids), name=f"dapo-watch-{prompt.group_id}")
        self._watchers.add(watcher)
        watcher.add_done_callback(self._watchers.discard)

    async def _watch(self, ids: list[str]) -> None:
        async for result in self.pipeline.as_completed(ids):
            self._inbox.put_nowait(result)

    def _absorb(self, result: JobResult, stats: BatchStats | None) -> None:
        owner = self._owner.pop(result.id, None)
        if owner is None:
            self._ignored.discard(result.id)  # cancelled or superseded by us: already accounted
            return
        prompt, sample = owner
        if result.state in (JobState.DONE, JobState.FAILED):
            sample.finished += 1
            if stats is not None:
                stats.rollouts_finished += 1
        why = infrastructure_failure(result)
        if why is None:
            sample.result, sample.valid, sample.done = result, True, True
        else:
            prompt.failures.append(f"sample {sample.index} attempt {sample.attempt}: {why}")
            if sample.attempt < self.config.max_sample_retries:
                sample.attempt += 1
                sample.job_id = None  # nothing of it is running until the retry is submitted
                prompt.retries += 1
                if stats is not None:
                    stats.retries += 1
                self._retry.append((prompt, sample))
                return
            sample.result, sample.valid, sample.done = result, False, True
        if all(s.done for s in prompt.samples):
            del self._prompts[prompt.group_id]
            self._pending.append(self._judge(prompt))

    def _judge(self, prompt: _Prompt) -> GroupResult:
        rewards = [s.result.reward if s.valid and s.result else None for s in prompt.samples]
        if self.config.on_sample_failure == "fail_group" and any(r is None for r in rewards):
            status, mean, std = GroupStatus.FAILED, None, None
        else:
            status, mean, std = judge(rewards, self.config.uniform)
        return GroupResult(
            group_id=prompt.group_id,
            prompt_key=prompt.prompt.key,
            status=status,
            batch_index=self._batch_index,
            started_batch=prompt.started_batch,
            rewards=rewards,
            reward_mean=mean,
            reward_std=std,
            masked=[r is None for r in rewards],
            rollouts_spent=prompt.finished(),
            retries=prompt.retries,
            failures=prompt.failures,
            elapsed_s=time.monotonic() - prompt.started_at,
            row=prompt.prompt.row,
            samples=[s.result for s in prompt.samples if s.result is not None],
        )

    def _account(self, group: GroupResult, stats: BatchStats, started: float) -> BatchEvent:
        group.batch_index = stats.batch_index
        group.carried_over = group.started_batch < stats.batch_index
        stats.rollouts_spent += group.rollouts_spent
        if group.status is GroupStatus.INFORMATIVE:
            stats.informative_groups += 1
            stats.carried_groups_delivered += int(group.carried_over)
            if stats.time_to_first_group_s is None:
                stats.time_to_first_group_s = time.monotonic() - started
            self._update_ratio(stats)
            return BatchEvent(type="group", group=group)
        if group.status is GroupStatus.UNIFORM:
            stats.uniform_groups += 1
        else:
            stats.failed_groups += 1
        self._update_ratio(stats)
        return BatchEvent(
            type="dropped", group=group if self.config.dropped_with_samples else group.summary()
        )

    @staticmethod
    def _update_ratio(stats: BatchStats) -> None:
        if stats.informative_groups:
            stats.rollouts_per_informative_group = stats.rollouts_spent / stats.informative_groups

    # -- batch boundary -------------------------------------------------------------------------
    async def _end_batch(self, stats: BatchStats) -> None:
        self._drain_inbox(stats)  # finished results already here are kept, whatever the policy
        policy = self._inflight_policy or self.config.on_ready
        if policy == "cancel" or stats.status == "failed":
            lost = sum(p.valid_finished() for p in self._prompts.values())
            spent = sum(p.finished() for p in self._prompts.values())
            cancelled, raced = await self._cancel_inflight(f"DAPO batch {stats.batch_index} ended")
            stats.discarded_finished_rollouts += lost + raced
            stats.rollouts_spent += spent + raced
            stats.cancelled_rollouts += cancelled
            self._retry.clear()
        else:
            stats.carried_prompts = len(self._prompts)
            stats.carried_ready_groups = len(self._pending)
            stats.carried_finished_rollouts = sum(p.finished() for p in self._prompts.values()) + sum(
                g.rollouts_spent for g in self._pending
            )
            stats.requeued_jobs = await self._promote_queued(stats)
            with contextlib.suppress(QueueFullError):
                self._submit_retries(stats)  # carried groups keep going between batches
        self._update_ratio(stats)

    async def _cancel_inflight(self, reason: str) -> tuple[int, int]:
        """Cancel every live job; returns (cancelled, finished before the cancel landed)."""
        ids = [s.job_id for p in self._prompts.values() for s in p.live_jobs() if s.job_id]
        for job_id in ids:
            self._owner.pop(job_id, None)
            self._ignored.add(job_id)
        self._prompts.clear()
        if not ids:
            return 0, 0
        with contextlib.suppress(JobNotFoundError):
            await self.pipeline.cancel_many(ids, reason=reason)
        raced = 0
        for job_id in ids:
            with contextlib.suppress(JobNotFoundError):
                if self.pipeline.get(job_id, mark_fetched=False).state in (JobState.DONE, JobState.FAILED):
                    raced += 1  # it finished between our decision and the cancel: thrown away
        return len(ids) - raced, raced

    async def _promote_queued(self, stats: BatchStats) -> int:
        """Carried jobs still waiting for INIT go back in the queue at carry priority, ahead of
        the next batch's new prompts. Nothing has run for them, so nothing is lost; one that
        started meanwhile is simply interrupted at INIT and re-queued; one that finished
        meanwhile is taken as it is."""
        prio = self.config.carry_priority
        queued: list[tuple[_Prompt, _Sample]] = []
        for prompt in self._prompts.values():
            for sample in prompt.live_jobs():
                if sample.priority >= prio or sample.job_id is None:
                    continue
                with contextlib.suppress(JobNotFoundError):
                    if self.pipeline.get(sample.job_id, mark_fetched=False).state is JobState.QUEUED:
                        queued.append((prompt, sample))
        if not queued:
            return 0

        async def requeue(prompt: _Prompt, sample: _Sample) -> int:
            assert sample.job_id is not None
            old = sample.job_id
            self._owner.pop(old, None)
            self._ignored.add(old)
            result = await self.pipeline.cancel(old, reason="DAPO carry-over: re-queued at carry priority")
            if result.state is JobState.CANCELLED:
                try:
                    self._submit(prompt, [sample], prio, stats)
                except QueueFullError:
                    self._retry.append((prompt, sample))
                return 1
            self._owner[old] = (prompt, sample)  # it finished first: keep its result
            self._absorb(result, stats)
            return 0

        done = await asyncio.gather(*(requeue(p, s) for p, s in queued))
        return sum(done)
