# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The service's state behind the HTTP faces: the pipeline, the backends, and the accept flag.

Every HTTP request is its own coroutine with its own reply; there is no shared control queue,
so concurrent control calls can never receive each other's answers.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from pydantic import BaseModel, ConfigDict, Field

from nemo_gym_prorl.loop_monitor import GcPauses, LoopMonitor
from nemo_gym_prorl.pipeline import InvalidInstanceError, JobResult, JobSpec, Pipeline, UnknownTaskError
from nemo_gym_prorl.service.backends import BackendInfo, BackendRegistry
from nemo_gym_prorl.service.errors import ApiError
from nemo_gym_prorl.service.journal import Journal

logger = logging.getLogger(__name__)

InstanceCheck = Callable[[Mapping[str, Any]], Awaitable[None]]
"""A check of one instance that must await (the domain's check lives in another server)."""

# Checks awaited at once for one submit (a trainer may submit thousands of rows in one call).
MAX_CONCURRENT_CHECKS = 32
# Rows of a batch's source checked per step: a dataset is read a chunk at a time, and the first
# bad row ends the reading.
CHECK_CHUNK_ROWS = 256


class Refusal(NamedTuple):
    """The first row refused at submit: its position among those submitted, and why."""

    index: int
    error: InvalidInstanceError | UnknownTaskError


def awaited_check(handler: object) -> InstanceCheck | None:
    """A handler's check at submit that must await (the agent handler's reaches a Gym resources
    server's `/check_instance`); None for handlers that check all in `validate`."""
    check = getattr(handler, "check_instance", None)
    return check if check is not None and inspect.iscoroutinefunction(check) else None


class ServiceOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    accepting: bool = Field(
        True, description="Accept jobs from start-up (ProRL clients call /start anyway; /stop pauses)."
    )
    require_backend: bool = Field(
        True, description="Refuse jobs (503) while no LLM backend can take work, as ProRL does."
    )
    process_timeout_s: float | None = Field(
        None, gt=0, description="Default limit of a blocking /process call (504 when exceeded)."
    )
    max_batch_bytes: int = Field(
        1 << 30,
        ge=1,
        description="Bytes of DAPO batch records kept (1 GiB; their groups' samples, in memory, "
        "estimated). Beyond it the samples of the oldest ended batches are dropped, delivered ones "
        "first; such a batch still answers with its stats, and with 410 for its groups.",
    )
    max_batches: int = Field(
        256,
        ge=1,
        description="Ended DAPO batch records kept, bytes aside: each keeps its stats and groups' "
        "summaries. Beyond it the oldest ended batch is forgotten (404), so their count, not only "
        "their samples' bytes, stays bounded however long a session runs.",
    )


class RolloutService:
    def __init__(
        self, pipeline: Pipeline, backends: BackendRegistry, options: ServiceOptions | None = None
    ) -> None:
        self.pipeline = pipeline
        self.backends = backends
        self.options = options or ServiceOptions()
        self.accepting = self.options.accepting
        # Set when the stack keeps a durable journal: an accepted job is on disk before its id
        # is answered, so a crash after the answer cannot lose it.
        self.journal: Journal | None = None
        self._closed = False
        self._loop_monitor = LoopMonitor()
        self._gc_pauses = GcPauses()

    async def start(self) -> None:
        self._loop_monitor.start()
        self._gc_pauses.start()
        await self.pipeline.start()

    async def close(self) -> None:
        """Cancel all jobs and release everything the pipeline opened (handlers' release)."""
        if self._closed:
            return
        self._closed = True
        self.accepting = False
        await self._loop_monitor.stop()
        self._gc_pauses.stop()
        try:
            await self.pipeline.stop()
        finally:
            try:
                if self.journal is not None:
                    await self.journal.close()
            finally:
                await self.backends.aclose()

    # -- admission --------------------------------------------------------------------------
    async def usable_backends(self) -> list[BackendInfo]:
        return [b for b in await self.backends.list() if not b.draining and b.healthy is not False]

    async def check_admission(self) -> None:
        if not self.accepting:
            raise ApiError(503, "not_running", "the service is stopped; POST /start to accept jobs")
        if self.options.require_backend and not await self.usable_backends():
            raise ApiError(
                503,
                "no_backend",
                "no LLM backend can take work; add one with POST /v1/backends or /add_llm_server",
            )

    async def admit(self, specs: Sequence[JobSpec]) -> list[JobSpec]:
        """The jobs with their task resolved (once, here), each instance checked by its task's
        handler: an unknown task or an instance the task cannot run is refused (400) before any
        work, whatever the service's state. Every door submits through this."""
        admitted, refusal = await self._admit(specs)
        if refusal is not None:
            raise refusal.error
        return admitted

    async def first_refusal(self, rows: Iterable[Mapping[str, Any]], task: str | None) -> Refusal | None:
        """The first of `rows` (a DAPO batch's source) that `admit` would refuse, with its index;
        None when all pass. Read a chunk at a time: a dataset is never held whole."""
        for chunk in itertools.batched(enumerate(rows), CHECK_CHUNK_ROWS, strict=False):  # last: short
            specs = [JobSpec(task=task, instance=dict(row)) for _, row in chunk]
            _, refusal = await self._admit(specs)
            if refusal is not None:
                return Refusal(chunk[refusal.index][0], refusal.error)
            await asyncio.sleep(0)  # a long source must not hold the event loop
        return None

    async def _admit(self, specs: Sequence[JobSpec]) -> tuple[list[JobSpec], Refusal | None]:
        """The specs resolved, and the first refused. The handlers' own checks run first, in
        order, up to the first refusal; the awaited checks then run for the rows before it (a row
        after it cannot be the first). A check that could not be made raises (503), unless a row
        was refused: bad input is answered whatever the state."""
        resolved: list[JobSpec] = []
        refusal: Refusal | None = None
        for index, spec in enumerate(specs):
            try:
                resolved.append(self._resolve(spec))
            except (InvalidInstanceError, UnknownTaskError) as exc:
                refusal = Refusal(index, exc)
                break
        try:
            earlier = await self._awaited_refusal(resolved)
        except Exception:
            if refusal is None:
                raise
            earlier = None  # a row is refused anyway: that answer needs no other check
        return resolved, earlier or refusal

    def _resolve(self, spec: JobSpec) -> JobSpec:
        task = self.pipeline.handlers.resolve(spec.task, spec.instance)
        self.pipeline.handlers.validate(task, spec.instance)
        return spec if spec.task == task else spec.model_copy(update={"task": task})

    async def _awaited_refusal(self, specs: Sequence[JobSpec]) -> Refusal | None:
        """Run the handlers' awaited checks of `specs` (resolved), a few at once; the first
        refusal by position, else the first error of a check that could not be made."""
        gate = asyncio.Semaphore(MAX_CONCURRENT_CHECKS)

        async def run(check: InstanceCheck, instance: Mapping[str, Any]) -> None:
            async with gate:
                await check(instance)

        checks = [
            (index, check, spec.instance)
            for index, spec in enumerate(specs)
            if (check := awaited_check(self.pipeline.handlers.get(str(spec.task)))) is not None
        ]
        if not checks:
            return None
        outcomes = await asyncio.gather(*(run(c, i) for _, c, i in checks), return_exceptions=True)
        failed = [(c[0], o) for c, o in zip(checks, outcomes, strict=True) if isinstance(o, BaseException)]
        for index, error in failed:
            if isinstance(error, InvalidInstanceError):
                return Refusal(index, error)
        if failed:
            raise failed[0][1]
        return None

    async def submit(self, specs: Sequence[JobSpec]) -> list[str]:
        admitted = await self.admit(specs)  # 400 before 503: bad input is bad whatever the state
        await self.check_admission()
        ids = self.pipeline.submit(admitted)
        await self.flushed()
        return ids

    async def flushed(self) -> None:
        """Return once everything accepted so far is in the journal (at once without one)."""
        if self.journal is not None:
            await self.journal.flush()

    async def stop_accepting(self) -> int:
        """ProRL's /stop: refuse new jobs and cancel the ones in flight; returns how many."""
        self.accepting = False
        live = self.pipeline.live_ids()
        await self.pipeline.cancel_many(live, reason="service stopped")
        return len(live)

    # -- blocking rollout (ProRL /process) --------------------------------------------------
    async def process(self, spec: JobSpec, timeout_s: float | None) -> JobResult:
        """Submit one job and wait for it. On timeout the job is cancelled and 504 raised."""
        (job_id,) = await self.submit([spec])
        limit = timeout_s or self.options.process_timeout_s
        try:
            async for result in self.pipeline.as_completed([job_id], limit):
                return result
        except asyncio.CancelledError:
            # The client went away: nobody will read this rollout, free its resources.
            await asyncio.shield(self.pipeline.cancel(job_id, reason="client disconnected"))
            raise
        await self.pipeline.cancel(job_id, reason=f"/process timeout of {limit}s")
        raise ApiError(504, "timeout", f"rollout {job_id} did not finish within {limit}s; it was cancelled")

    async def stream(self, job_ids: Sequence[str], timeout_s: float) -> AsyncIterator[JobResult]:
        async for result in self.pipeline.as_completed(job_ids, timeout_s):
            yield result
