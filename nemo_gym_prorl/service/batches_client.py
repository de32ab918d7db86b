# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Client methods for DAPO batches, as mixins for `RolloutClient` / `AsyncRolloutClient`.

They use only the clients' `_call(method, path, ...)` and `_http` (an httpx client), so:

    class RolloutClient(BatchesClientMixin): ...            # sync
    class AsyncRolloutClient(AsyncBatchesClientMixin): ...  # asyncio

    with RolloutClient(url) as client:
        batch = client.start_batch(groups=16, source={"dataset": "math_train", "epochs": None},
                                   config={"group_size": 8, "max_prompts_in_flight": 64})
        for event in client.stream_batch(batch.batch_id):
            if event.type == "group": train_on(event.group)
        batch = client.start_batch(groups=16, session_id=batch.session_id)  # carried work kept
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Literal

import httpx

from nemo_gym_prorl.pipeline.dapo import BatchEvent, DapoConfig
from nemo_gym_prorl.service.batch_manager import BatchInfo, BatchRequest, SessionInfo, SourceSpec
from nemo_gym_prorl.service.client_errors import api_error

InflightPolicy = Literal["carry_over", "cancel"]


def batch_body(
    *,
    groups: int | None = None,
    session_id: str | None = None,
    source: SourceSpec | Mapping[str, Any] | None = None,
    config: DapoConfig | Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Validated here, so a malformed request fails before it is sent."""
    request = BatchRequest.model_validate(
        {
            "groups": groups,
            "session_id": session_id,
            "source": source.model_dump() if isinstance(source, SourceSpec) else source,
            "config": config.model_dump() if isinstance(config, DapoConfig) else config,
        }
    )
    return request.model_dump(mode="json", exclude_none=True)


def _event(raw: str) -> BatchEvent | None:
    raw = raw.strip()
    return BatchEvent.model_validate(json.loads(raw)) if raw else None


class BatchesClientMixin:
    _http: httpx.Client

    if TYPE_CHECKING:  # provided by RolloutClient (a stub here would shadow it in the MRO)

        def _call(self, method: str, path: str, *, timeout: float | None = None, **kw: Any) -> Any: ...

    def start_batch(
        self,
        *,
        groups: int | None = None,
        session_id: str | None = None,
        source: SourceSpec | Mapping[str, Any] | None = None,
        config: DapoConfig | Mapping[str, Any] | None = None,
    ) -> BatchInfo:
        body = batch_body(groups=groups, session_id=session_id, source=source, config=config)
        return BatchInfo.model_validate(self._call("POST", "/v1/batches", json=body))

    def get_batch(self, batch_id: str, *, include_groups: bool = False, wait_s: float = 0.0) -> BatchInfo:
        params = {"include_groups": include_groups, "wait_s": wait_s}
        return BatchInfo.model_validate(
            self._call("GET", f"/v1/batches/{batch_id}", params=params, timeout=wait_s)
        )

    def stream_batch(self, batch_id: str, *, timeout_s: float = 86_400) -> Iterator[BatchEvent]:
        with self._http.stream("GET", f"/v1/batches/{batch_id}/stream", timeout=timeout_s) as response:
            if response.status_code >= 400:
                response.read()
                raise api_error(response)
            for raw in response.iter_lines():
                event = _event(raw)
                if event is not None:
                    yield event

    def cancel_batch(self, batch_id: str, *, inflight: InflightPolicy | None = None) -> BatchInfo:
        params = {"inflight": inflight} if inflight else {}
        return BatchInfo.model_validate(self._call("DELETE", f"/v1/batches/{batch_id}", params=params))

    def batch_session(self, session_id: str) -> SessionInfo:
        return SessionInfo.model_validate(self._call("GET", f"/v1/batch_sessions/{session_id}"))

    def close_batch_session(self, session_id: str) -> int:
        return int(self._call("DELETE", f"/v1/batch_sessions/{session_id}")["discarded_finished_rollouts"])


class AsyncBatchesClientMixin:
    _http: httpx.AsyncClient

    if TYPE_CHECKING:  # provided by AsyncRolloutClient

        async def _call(self, method: str, path: str, *, timeout: float | None = None, **kw: Any) -> Any: ...

    async def start_batch(
        self,
        *,
        groups: int | None = None,
        session_id: str | None = None,
        source: SourceSpec | Mapping[str, Any] | None = None,
        config: DapoConfig | Mapping[str, Any] | None = None,
    ) -> BatchInfo:
        body = batch_body(groups=groups, session_id=session_id, source=source, config=config)
        return BatchInfo.model_validate(await self._call("POST", "/v1/batches", json=body))

    async def get_batch(
        self, batch_id: str, *, include_groups: bool = False, wait_s: float = 0.0
    ) -> BatchInfo:
        params = {"include_groups": include_groups, "wait_s": wait_s}
        data = await self._call("GET", f"/v1/batches/{batch_id}", params=params, timeout=wait_s)
        return BatchInfo.model_validate(data)

    async def stream_batch(self, batch_id: str, *, timeout_s: float = 86_400) -> AsyncIterator[BatchEvent]:
        async with self._http.stream("GET", f"/v1/batches/{batch_id}/stream", timeout=timeout_s) as response:
            if response.status_code >= 400:
                await response.aread()
                raise api_error(response)
            async for raw in response.aiter_lines():
                event = _event(raw)
                if event is not None:
                    yield event

    async def cancel_batch(self, batch_id: str, *, inflight: InflightPolicy | None = None) -> BatchInfo:
        params = {"inflight": inflight} if inflight else {}
        return BatchInfo.model_validate(await self._call("DELETE", f"/v1/batches/{batch_id}", params=params))

    async def batch_session(self, session_id: str) -> SessionInfo:
        return SessionInfo.model_validate(await self._call("GET", f"/v1/batch_sessions/{session_id}"))

    async def close_batch_session(self, session_id: str) -> int:
        data = await self._call("DELETE", f"/v1/batch_sessions/{session_id}")
        return int(data["discarded_finished_rollouts"])
