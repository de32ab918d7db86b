# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""HTTP face of DAPO batches (dynamic sampling over the pipeline): `/v1/batches` and `/v1/batch_sessions`.

    POST   /v1/batches                    start a batch (202): inline rows or a dataset name
    GET    /v1/batches                    recent batches (stats only)
    GET    /v1/batches/{id}               status and stats; `?include_groups=true` adds the groups
    GET    /v1/batches/{id}/stream        NDJSON: one line per group event, then an `end` line
    DELETE /v1/batches/{id}               end it now (`?inflight=carry_over|cancel`)
    GET    /v1/batch_sessions             open sessions
    GET    /v1/batch_sessions/{id}        one session (in flight, ready groups, totals)
    DELETE /v1/batch_sessions/{id}        close it: cancels everything it has in flight

Included by `create_app` as `app.include_router(batches_router(service), dependencies=guard)`;
the router's lifespan closes every session before the service stops the pipeline.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from fastapi.responses import StreamingResponse

from nemo_gym_prorl.pipeline.dapo import BatchEvent
from nemo_gym_prorl.service.batch_manager import (
    BatchInfo,
    BatchList,
    BatchManager,
    BatchRequest,
    DatasetCatalog,
    SessionInfo,
    SessionList,
)
from nemo_gym_prorl.service.core import RolloutService


def batches_router(
    service: RolloutService,
    *,
    datasets: DatasetCatalog | None = None,
    manager: BatchManager | None = None,
) -> APIRouter:
    batches = manager or BatchManager(service, datasets)

    @contextlib.asynccontextmanager
    async def lifespan(_: Any) -> AsyncIterator[None]:
        # Nested inside the app's lifespan: enters after the stack started (its journal open), and
        # exits first, so sessions close before the pipeline.
        await batches.resume()
        try:
            yield
        finally:
            await batches.aclose()

    router = APIRouter(prefix="/v1", tags=["dapo batches"], lifespan=lifespan)

    @router.post("/batches", status_code=202, response_model=BatchInfo)
    async def start_batch(body: BatchRequest) -> BatchInfo:
        """Start collecting B informative groups; returns at once with the batch and session id."""
        run = await batches.start(body)
        return run.info()

    @router.get("/batches", response_model=BatchList)
    async def list_batches() -> BatchList:
        return BatchList(batches=[run.info() for run in batches.batches.values()])

    @router.get("/batches/{batch_id}", response_model=BatchInfo)
    async def get_batch(
        batch_id: str,
        include_groups: Annotated[
            bool, Query(description="Add delivered groups and dropped summaries.")
        ] = False,
        wait_s: Annotated[float, Query(ge=0, le=600, description="Long-poll until the batch ends.")] = 0,
    ) -> BatchInfo:
        run = batches.get(batch_id)
        if wait_s > 0 and not run.done.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait_s):
                    await run.done.wait()
        return run.info(include=include_groups)

    @router.get(
        "/batches/{batch_id}/stream",
        response_class=StreamingResponse,
        responses={200: {"content": {"application/x-ndjson": {"schema": BatchEvent.model_json_schema()}}}},
    )
    async def stream_batch(batch_id: str) -> StreamingResponse:
        """NDJSON `{"type": "group"|"dropped"|"end", ...}` lines from the batch's start (replayed)
        until its end; a client that disconnects does not stop the batch."""
        events = batches.get(batch_id).follow()  # 410 here, before the stream, if its samples are gone

        async def lines() -> AsyncIterator[bytes]:
            async for event in events:
                yield event.model_dump_json().encode() + b"\n"

        return StreamingResponse(lines(), media_type="application/x-ndjson")

    @router.delete("/batches/{batch_id}", response_model=BatchInfo)
    async def cancel_batch(
        batch_id: str,
        inflight: Annotated[
            Literal["carry_over", "cancel"] | None,
            Query(description="In-flight jobs: keep for the session's next batch, or cancel."),
        ] = None,
    ) -> BatchInfo:
        run = await batches.cancel(batch_id, inflight)
        return run.info()

    @router.get("/batch_sessions", response_model=SessionList)
    async def list_sessions() -> SessionList:
        return SessionList(sessions=[s.info() for s in batches.sessions.values()])

    @router.get("/batch_sessions/{session_id}", response_model=SessionInfo)
    async def get_session(session_id: str) -> SessionInfo:
        return batches.session(session_id).info()

    @router.delete("/batch_sessions/{session_id}")
    async def close_session(session_id: str) -> dict[str, Any]:
        lost = await batches.close_session(session_id)
        return {"status": "ok", "session_id": session_id, "discarded_finished_rollouts": lost}

    return router
