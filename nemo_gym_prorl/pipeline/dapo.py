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
Its config and reports are in `dapo_models`, the bookkeeping of one prompt in `dapo_prompts`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator
from typing import Any, Literal

from nemo_gym_prorl.pipeline.dapo_models import (
    BatchEvent,
    BatchFailedError,
    BatchStats,
    BatchStatus,
    DapoConfig,
)
from nemo_gym_prorl.pipeline.dapo_prompts import PromptGroup, Sample
from nemo_gym_prorl.pipeline.engine import Pipeline
from nemo_gym_prorl.pipeline.groups import (
    GroupResult,
    GroupStatus,
    infrastructure_failure,
)
from nemo_gym_prorl.pipeline.job import JobResult, JobSpec, JobState
from nemo_gym_prorl.pipeline.prompt_source import PromptRow, PromptSource
from nemo_gym_prorl.pipeline.queue import QueueFullError
from nemo_gym_prorl.pipeline.store import JobNotFoundError
from nemo_gym_prorl.server_paths import redact_server_paths

logger = logging.getLogger(__name__)

__all__ = ["BatchEvent", "BatchFailedError", "BatchStats", "BatchStatus", "DapoConfig", "DapoScheduler"]

# How long to wait before retrying a submission the pipeline refused for lack of queue room.
_QUEUE_FULL_BACKOFF_S = 0.05


class _TooManyFailuresError(RuntimeError):
    pass


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
        self._prompts: dict[str, PromptGroup] = {}
        self._owner: dict[str, tuple[PromptGroup, Sample]] = {}
        self._pending: deque[GroupResult] = deque()  # judged, not yet delivered
        self._retry: deque[tuple[PromptGroup, Sample]] = deque()  # resubmissions refused (queue full)
        self._next: PromptRow | None = None  # taken from the source, not yet submitted
        self._source_done = False
        self._backoff_until = 0.0
        self._watchers: set[asyncio.Task[None]] = set()
        self._seq = 0
        self._batch_index = 0
        self._policy_version: int | None = None  # the trainer's step the running batch carries
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
    def batches_started(self) -> int:
        return self._batch_index

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

    async def stream_batch(
        self, groups: int | None = None, policy_version: int | None = None
    ) -> AsyncIterator[BatchEvent]:
        """Events as groups complete: `group` (informative), `dropped` (uniform/failed), and a
        final `end` with the stats. Stopping early (aclose, cancel) ends the batch as `cancelled`
        and applies the in-flight policy. `policy_version`: the trainer's step, stamped on the
        jobs this batch starts (a trainer that refits its own backends)."""
        if self._closed:
            raise RuntimeError(f"DAPO scheduler {self.id} is closed")
        if self._active:
            raise RuntimeError(f"DAPO scheduler {self.id} already has a batch running")
        self._active = True
        self._batch_index += 1
        self._policy_version = policy_version
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
                        event = stats.record_group(
                            self._pending.popleft(), started, self.config.dropped_with_samples
                        )
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
                # The stats are answered to clients: the paths stay in the log.
                logger.warning("batch %d failed", stats.batch_index, exc_info=True)
                stats.error = redact_server_paths(f"{type(exc).__name__}: {exc}")
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

    def resume(self, prompts: list[PromptGroup], *, batches_before: int, prompts_started: int) -> None:
        """Take back what a dead service's scheduler of this name had running: its prompts not yet
        judged in a finished batch, each sample bound to its latest job (run again or finished,
        under the same id), and where it stood in its batches and prompt numbers. Before the next
        `stream_batch`; the caller has moved the source past the `prompts_started` rows."""
        if self._active or self._prompts:
            raise RuntimeError(f"DAPO scheduler {self.id} has already started")
        self._batch_index = batches_before
        self._seq = max([prompts_started, *(p.seq for p in prompts)])
        for prompt in prompts:
            self._prompts[prompt.group_id] = prompt
            ids = [s.job_id for s in prompt.samples if s.job_id is not None]
            for sample in prompt.samples:
                if sample.job_id is not None:
                    self._owner[sample.job_id] = (prompt, sample)
            watcher = asyncio.create_task(self._watch(ids), name=f"dapo-watch-{prompt.group_id}")
            self._watchers.add(watcher)
            watcher.add_done_callback(self._watchers.discard)

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
            while len(self._prompts) < self.config.max_prompts_in_flight and self._room_for_a_group():
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

    def _room_for_a_group(self) -> bool:
        """Whether G more rollouts fit under R, counting every sample not yet done (running,
        queued, or waiting to be retried)."""
        limit = self.config.max_rollouts_in_flight
        if limit is None:
            return True
        owed = sum(not sample.done for prompt in self._prompts.values() for sample in prompt.samples)
        return owed + self.config.group_size <= limit

    def _submit_retries(self, stats: BatchStats) -> None:
        while self._retry:
            prompt, sample = self._retry[0]
            self._submit(prompt, [sample], self.config.carry_priority, stats)
            self._retry.popleft()

    def _start(self, row: PromptRow, stats: BatchStats) -> None:
        self._seq += 1
        prompt = PromptGroup(
            seq=self._seq,
            group_id=f"{self.id}-{self._seq}",
            prompt=row,
            started_batch=self._batch_index,
            started_at=time.monotonic(),
            samples=[Sample(index=k) for k in range(self.config.group_size)],
        )
        self._submit(prompt, prompt.samples, self.config.priority, stats)  # all G, or none
        self._prompts[prompt.group_id] = prompt
        stats.prompts_started += 1

    def _submit(
        self, prompt: PromptGroup, samples: list[Sample], priority: int, stats: BatchStats | None
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
                    policy_version=self._policy_version,
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
        if owner is None:  # cancelled or superseded by us: already accounted
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
            self._pending.append(prompt.judge(self.config, self._batch_index))

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
        stats.update_ratio()

    async def _cancel_inflight(self, reason: str) -> tuple[int, int]:
        """Cancel every live job; returns (cancelled, finished before the cancel landed)."""
        ids = [s.job_id for p in self._prompts.values() for s in p.live_jobs() if s.job_id]
        for job_id in ids:
            self._owner.pop(job_id, None)
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
        queued: list[tuple[PromptGroup, Sample]] = []
        for prompt in self._prompts.values():
            for sample in prompt.live_jobs():
                if sample.priority >= prio or sample.job_id is None:
                    continue
                with contextlib.suppress(JobNotFoundError):
                    if self.pipeline.get(sample.job_id, mark_fetched=False).state is JobState.QUEUED:
                        queued.append((prompt, sample))
        if not queued:
            return 0

        async def requeue(prompt: PromptGroup, sample: Sample) -> int:
            assert sample.job_id is not None
            old = sample.job_id
            self._owner.pop(old, None)
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
