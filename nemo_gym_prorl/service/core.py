# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The service's state behind the HTTP faces: the pipeline, the backends, and the accept flag.

Every HTTP request is its own coroutine with its own reply; there is no shared control queue,
so concurrent control calls can never receive each other's answers.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from nemo_gym_prorl.pipeline import JobResult, JobSpec, Pipeline
from nemo_gym_prorl.service.backends import BackendInfo, BackendRegistry
from nemo_gym_prorl.service.errors import ApiError

logger = logging.getLogger(__name__)


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


class RolloutService:
    def __init__(
        self, pipeline: Pipeline, backends: BackendRegistry, options: ServiceOptions | None = None
    ) -> None:
        self.pipeline = pipeline
        self.backends = backends
        self.options = options or ServiceOptions()
        self.accepting = self.options.accepting
        self._closed = False

    async def start(self) -> None:
        await self.pipeline.start()

    async def close(self) -> None:
        """Cancel all jobs and release everything the pipeline opened (handlers' release)."""
        if self._closed:
            return
        self._closed = True
        self.accepting = False
        try:
            await self.pipeline.stop()
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

    def admit(self, specs: Sequence[JobSpec]) -> list[JobSpec]:
        """The jobs with their task resolved (once, here), each instance checked by its task's
        handler: an unknown task or an instance the task cannot run is refused (400) before any
        work, whatever the service's state. Every door submits through this."""
        admitted = []
        for spec in specs:
            task = self.pipeline.handlers.resolve(spec.task, spec.instance)
            self.pipeline.handlers.validate(task, spec.instance)
            admitted.append(spec if spec.task == task else spec.model_copy(update={"task": task}))
        return admitted

    def check_instance(self, instance: Mapping[str, Any], task: str | None = None) -> None:
        """Raise as `admit` would for one instance (a DAPO batch's inline rows)."""
        self.admit([JobSpec(task=task, instance=dict(instance))])

    async def submit(self, specs: Sequence[JobSpec]) -> list[str]:
        admitted = self.admit(specs)  # 400 before 503: bad input is bad whatever the state
        await self.check_admission()
        return self.pipeline.submit(admitted)

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
