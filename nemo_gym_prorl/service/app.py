# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The FastAPI app: the native `/v1` API, the ProRL-compatible API, and operations endpoints.

A thin face over `RolloutService`; all logic lives in the pipeline and the service core.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Annotated

from fastapi import APIRouter, Depends, FastAPI, Query, Request, Response
from fastapi.responses import StreamingResponse

import nemo_gym_prorl
from nemo_gym_prorl.llm.policy import PublishReport, PublishRequest
from nemo_gym_prorl.pipeline import JobResult
from nemo_gym_prorl.service.auth import bearer_guard
from nemo_gym_prorl.service.backends import BackendNotFoundError, normalize_url
from nemo_gym_prorl.service.batch_manager import DatasetCatalog
from nemo_gym_prorl.service.batches import batches_router
from nemo_gym_prorl.service.core import RolloutService
from nemo_gym_prorl.service.errors import ApiError, ErrorBodyDoc, install_error_handlers
from nemo_gym_prorl.service.metrics import CONTENT_TYPE, collect, render
from nemo_gym_prorl.service.models import (
    Ack,
    AddServerRequest,
    BackendRequest,
    BackendsResponse,
    CancelRequest,
    PolicyResponse,
    ProcessRequest,
    ProcessResult,
    ProrlStatus,
    StatusResponse,
    StreamLine,
    StreamRequest,
    SubmitRequest,
    SubmitResponse,
    WaitRequest,
    WaitResponse,
    result_line,
)

JobId = Annotated[str, Query(min_length=1, max_length=128)]


Lifecycle = tuple[Callable[[], Awaitable[None]], Callable[[], Awaitable[None]]]


def create_app(
    service: RolloutService,
    *,
    token: str | None = None,
    manage_lifecycle: bool = True,
    datasets: DatasetCatalog | None = None,
    lifecycle: Lifecycle | None = None,
) -> FastAPI:
    """An app serving the rollout API alone. With `manage_lifecycle`, start-up starts the
    service and shutdown closes everything it opened (`lifecycle`: the (start, close) to call
    instead, e.g. a `RolloutStack`'s). `datasets`: the server-side JSONL datasets DAPO batches
    may name (default: from the environment, `PRORL_DATASETS_DIR` / `PRORL_DATASETS`)."""
    start, close = lifecycle or (service.start, service.close)

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        if manage_lifecycle:
            await start()
        try:
            yield
        finally:
            if manage_lifecycle:
                await close()

    app = FastAPI(
        title="nemo-gym-prorl rollout service",
        version=nemo_gym_prorl.__version__,
        description="Rollout-as-a-service: submit agent rollouts, poll or stream results.",
        lifespan=lifespan,
        responses=ErrorBodyDoc,
    )
    app.state.service = service
    install_error_handlers(app)
    app.include_router(rollout_router(service, token=token, datasets=datasets))
    return app


def rollout_router(
    service: RolloutService,
    *,
    token: str | None = None,
    datasets: DatasetCatalog | None = None,
    health: bool = True,
) -> APIRouter:
    """Every route of the rollout API in one router, for any FastAPI app to include (with
    `install_error_handlers(app, ...)`): native `/v1`, DAPO batches and the ProRL-compatible API
    behind the bearer guard; `/metrics` (and `/healthz` unless the host app has its own) open."""
    router = APIRouter(responses=ErrorBodyDoc)
    guard = [Depends(bearer_guard(token))]
    router.include_router(_native_router(service), dependencies=guard)
    catalog = datasets if datasets is not None else DatasetCatalog.from_env()
    router.include_router(batches_router(service, datasets=catalog), dependencies=guard)
    router.include_router(_prorl_router(service), dependencies=guard)
    router.include_router(_ops_router(service, health=health))
    return router


async def _disconnected(request: Request) -> None:
    """Return when the client goes away (the request body has already been read)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


def _native_router(service: RolloutService) -> APIRouter:
    router = APIRouter(prefix="/v1", tags=["rollouts"])
    pipeline = service.pipeline

    @router.post("/rollouts", status_code=202, response_model=SubmitResponse)
    async def submit(body: SubmitRequest) -> SubmitResponse:
        """Queue one or many jobs; returns their ids at once (all accepted, or none)."""
        return SubmitResponse(ids=await service.submit(body.jobs))

    @router.get("/rollouts/{job_id}", response_model=JobResult)
    async def get_rollout(
        job_id: str,
        wait_s: Annotated[float, Query(ge=0, le=600, description="Long-poll up to this long.")] = 0,
    ) -> JobResult:
        result = await pipeline.fetch(job_id)  # a result spilled out of memory: from the journal
        if wait_s > 0 and not result.state.terminal:
            async for done in pipeline.as_completed([job_id], wait_s):
                return done
            return await pipeline.fetch(job_id)
        return result

    @router.delete("/rollouts/{job_id}", response_model=JobResult)
    async def cancel_rollout(job_id: str) -> JobResult:
        """Cancel at any stage; returns once the job's resources are released."""
        return await pipeline.cancel(job_id)

    @router.post("/rollouts/wait", response_model=WaitResponse)
    async def wait(body: WaitRequest) -> WaitResponse:
        results, pending = await pipeline.wait(body.ids, body.timeout_s, body.mode)
        # Asked after the wait: a spilled result the journal no longer held is missing too.
        answered = {r.id for r in results}.union(pending)
        missing = {
            i: r for i in body.ids if i not in answered and (r := pipeline.missing_reason(i)) is not None
        }
        return WaitResponse(results=results, pending=pending, missing=missing)

    @router.post(
        "/rollouts/stream",
        response_class=StreamingResponse,
        responses={200: {"content": {"application/x-ndjson": {"schema": StreamLine.model_json_schema()}}}},
    )
    async def stream(body: StreamRequest) -> StreamingResponse:
        """NDJSON: a `result` line per job as it finishes, `missing` lines, then one `end` line."""
        ids = list(dict.fromkeys(body.ids))
        missing = {i: r for i in ids if (r := pipeline.missing_reason(i)) is not None}
        known = [i for i in ids if i not in missing]

        async def lines() -> AsyncIterator[bytes]:
            for job_id, reason in missing.items():
                yield StreamLine(type="missing", id=job_id, reason=reason).model_dump_json().encode() + b"\n"
            seen: set[str] = set()
            async for result in service.stream(known, body.timeout_s):
                seen.add(result.id)
                yield result_line(result, pipeline.held_json(result.id))
            pending: list[str] = []
            for job_id in (i for i in known if i not in seen):
                reason = pipeline.missing_reason(job_id)  # spilled, but the journal no longer held it
                if reason is None:
                    pending.append(job_id)
                else:
                    yield (
                        StreamLine(type="missing", id=job_id, reason=reason).model_dump_json().encode()
                        + b"\n"
                    )
            yield StreamLine(type="end", pending=pending).model_dump_json().encode() + b"\n"

        return StreamingResponse(lines(), media_type="application/x-ndjson")

    @router.get("/backends", response_model=BackendsResponse, tags=["backends"])
    async def list_backends() -> BackendsResponse:
        return BackendsResponse(backends=await service.backends.list())

    @router.post("/backends", response_model=BackendsResponse, tags=["backends"])
    async def add_backend(body: BackendRequest) -> BackendsResponse:
        await service.backends.add(body.url, **body.options)
        return BackendsResponse(backends=await service.backends.list())

    @router.delete("/backends", response_model=BackendsResponse, tags=["backends"])
    async def remove_backend(url: Annotated[str, Query(min_length=1, max_length=2048)]) -> BackendsResponse:
        if not await service.backends.remove(url):
            raise BackendNotFoundError(f"no backend {normalize_url(url)!r}")
        return BackendsResponse(backends=await service.backends.list())

    @router.post("/backends/drain", response_model=BackendsResponse, tags=["backends"])
    async def drain_backend(body: BackendRequest) -> BackendsResponse:
        """Stop sending new work to a backend; it leaves once idle."""
        await service.backends.drain(body.url)
        return BackendsResponse(backends=await service.backends.list())

    @router.post("/policy", response_model=PublishReport, tags=["policy"])
    async def publish_policy(body: PublishRequest) -> PublishReport:
        """Publish policy `version` (a LoRA adapter directory): every healthy backend loads it
        before any new turn uses it; a backend that fails to load it stops serving."""
        return await service.backends.publish_policy(body)

    @router.get("/policy", response_model=PolicyResponse, tags=["policy"])
    async def policy() -> PolicyResponse:
        return PolicyResponse(
            trainer_version=pipeline.policy_clock.current(),
            served=service.backends.policy_status(),
            staleness=pipeline.config.staleness,
        )

    @router.get("/status", response_model=StatusResponse, tags=["operations"])
    async def status() -> StatusResponse:
        return StatusResponse(
            accepting=service.accepting,
            tasks=pipeline.handlers.names(),
            pipeline=pipeline.status(),
            backends=await service.backends.list(),
        )

    return router


def _prorl_router(service: RolloutService) -> APIRouter:
    """ProRL Agent's API, same paths and shapes, so its trainers work unchanged."""
    router = APIRouter(tags=["prorl-compatible"])
    pipeline = service.pipeline

    @router.post("/add_llm_server", response_model=Ack)
    async def add_llm_server(body: AddServerRequest) -> Ack:
        info = await service.backends.add(body.address)
        return Ack(message=f"added {info.url}")

    @router.post("/clear_llm_server", response_model=Ack)
    async def clear_llm_server() -> Ack:
        removed = [b.url for b in await service.backends.list()]
        for url in removed:
            await service.backends.remove(url)
        return Ack(message=f"removed {len(removed)} LLM server(s)")

    @router.post("/start", response_model=Ack)
    async def start() -> Ack:
        if service.options.require_backend and not await service.usable_backends():
            raise ApiError(503, "no_backend", "no LLM server added; POST /add_llm_server first")
        service.accepting = True
        return Ack(message="started")

    @router.post("/stop", response_model=Ack)
    async def stop() -> Ack:
        cancelled = await service.stop_accepting()
        return Ack(message=f"stopped; cancelled {cancelled} job(s) in flight")

    @router.get("/status", response_model=ProrlStatus)
    async def status() -> ProrlStatus:
        servers = [b.url for b in await service.backends.list()]
        return ProrlStatus(
            running=service.accepting,
            llm_servers=servers,
            num_llm_servers=len(servers),
            pipeline=pipeline.status(),
        )

    @router.post("/cancel", response_model=JobResult)
    async def cancel(body: CancelRequest) -> JobResult:
        return await pipeline.cancel(body.job_id)

    @router.post("/process", response_model=ProcessResult)
    async def process(body: ProcessRequest, request: Request) -> ProcessResult:
        """Run one rollout and block until it ends (504 after `timeout`; cancelled if the client
        disconnects)."""
        work = asyncio.ensure_future(service.process(body.job_spec(), body.timeout))
        gone = asyncio.ensure_future(_disconnected(request))
        try:
            await asyncio.wait({work, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not work.done():
                work.cancel()  # the client left: service.process cancels the job
                with contextlib.suppress(asyncio.CancelledError):
                    await work
            gone.cancel()
        if work.cancelled():
            raise ApiError(499, "client_closed", "client disconnected; the rollout was cancelled")
        return ProcessResult.from_result(work.result())

    return router


def _ops_router(service: RolloutService, *, health: bool) -> APIRouter:
    router = APIRouter(tags=["operations"])

    if health:

        @router.get("/healthz")
        async def healthz() -> dict[str, str]:
            return {"status": "ok" if service.pipeline.running else "stopped"}

    @router.get("/metrics", response_class=Response, responses={200: {"content": {"text/plain": {}}}})
    async def metrics() -> Response:
        body = render(collect(service.pipeline, await service.backends.list(), service.accepting))
        return Response(body, media_type=CONTENT_TYPE)

    return router
