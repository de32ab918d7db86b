# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Client methods for DAPO batches, as mixins for `RolloutClient` / `AsyncRolloutClient`.

Each request is described once here (`client_requests.Call`); the mixins only hand it to the
client's transport (`_send` for one answer, `_lines` for a stream), sync or asyncio:

    with RolloutClient(url) as client:
        batch = client.start_batch(groups=16, source={"dataset": "math_train", "epochs": None},
                                   config={"group_size": 8, "max_prompts_in_flight": 64})
        for event in client.stream_batch(batch.batch_id):
            if event.type == "group": train_on(event.group)
        batch = client.start_batch(groups=16, session_id=batch.session_id)  # carried work kept
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Literal

from nemo_gym_prorl.pipeline.dapo import BatchEvent, DapoConfig
from nemo_gym_prorl.service.batch_manager import BatchInfo, BatchRequest, SessionInfo, SourceSpec
from nemo_gym_prorl.service.client_requests import Call, StreamCall, ndjson_line

InflightPolicy = Literal["carry_over", "cancel"]
Groups = int | None
Id = str | None
Source = SourceSpec | Mapping[str, Any] | None
Config = DapoConfig | Mapping[str, Any] | None


def batch_body(
    *, groups: int | None = None, session_id: str | None = None, source: Source = None, config: Config = None
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
    data = ndjson_line(raw)
    return BatchEvent.model_validate(data) if data is not None else None


def start_batch(
    groups: int | None, session_id: str | None, source: Source, config: Config
) -> Call[BatchInfo]:
    body = batch_body(groups=groups, session_id=session_id, source=source, config=config)
    return Call("POST", "/v1/batches", BatchInfo.model_validate, {"json": body})


def get_batch(batch_id: str, include_groups: bool, wait_s: float) -> Call[BatchInfo]:
    params = {"include_groups": include_groups, "wait_s": wait_s}
    return Call("GET", f"/v1/batches/{batch_id}", BatchInfo.model_validate, {"params": params}, wait_s)


def stream_batch(batch_id: str, timeout_s: float) -> StreamCall[BatchEvent]:
    return StreamCall("GET", f"/v1/batches/{batch_id}/stream", _event, timeout_s)


def cancel_batch(batch_id: str, inflight: InflightPolicy | None) -> Call[BatchInfo]:
    params = {"inflight": inflight} if inflight else {}
    return Call("DELETE", f"/v1/batches/{batch_id}", BatchInfo.model_validate, {"params": params})


def batch_session(session_id: str) -> Call[SessionInfo]:
    return Call("GET", f"/v1/batch_sessions/{session_id}", SessionInfo.model_validate)


def close_batch_session(session_id: str) -> Call[int]:
    discarded = lambda data: int(data["discarded_finished_rollouts"])  # noqa: E731
    return Call("DELETE", f"/v1/batch_sessions/{session_id}", discarded)


class BatchesClientMixin:
    if TYPE_CHECKING:  # provided by RolloutClient (a stub here would shadow it in the MRO)

        def _send[T](self, call: Call[T]) -> T: ...
        def _lines[T](self, call: StreamCall[T]) -> Iterator[T]: ...

    def start_batch(
        self, *, groups: Groups = None, session_id: Id = None, source: Source = None, config: Config = None
    ) -> BatchInfo:
        return self._send(start_batch(groups, session_id, source, config))

    def get_batch(self, batch_id: str, *, include_groups: bool = False, wait_s: float = 0.0) -> BatchInfo:
        return self._send(get_batch(batch_id, include_groups, wait_s))

    def stream_batch(self, batch_id: str, *, timeout_s: float = 86_400) -> Iterator[BatchEvent]:
        return self._lines(stream_batch(batch_id, timeout_s))

    def cancel_batch(self, batch_id: str, *, inflight: InflightPolicy | None = None) -> BatchInfo:
        return self._send(cancel_batch(batch_id, inflight))

    def batch_session(self, session_id: str) -> SessionInfo:
        return self._send(batch_session(session_id))

    def close_batch_session(self, session_id: str) -> int:
        return self._send(close_batch_session(session_id))


class AsyncBatchesClientMixin:
    if TYPE_CHECKING:  # provided by AsyncRolloutClient

        def _send[T](self, call: Call[T]) -> Awaitable[T]: ...
        def _lines[T](self, call: StreamCall[T]) -> AsyncIterator[T]: ...

    async def start_batch(
        self, *, groups: Groups = None, session_id: Id = None, source: Source = None, config: Config = None
    ) -> BatchInfo:
        return await self._send(start_batch(groups, session_id, source, config))

    async def get_batch(
        self, batch_id: str, *, include_groups: bool = False, wait_s: float = 0.0
    ) -> BatchInfo:
        return await self._send(get_batch(batch_id, include_groups, wait_s))

    def stream_batch(self, batch_id: str, *, timeout_s: float = 86_400) -> AsyncIterator[BatchEvent]:
        return self._lines(stream_batch(batch_id, timeout_s))

    async def cancel_batch(self, batch_id: str, *, inflight: InflightPolicy | None = None) -> BatchInfo:
        return await self._send(cancel_batch(batch_id, inflight))

    async def batch_session(self, session_id: str) -> SessionInfo:
        return await self._send(batch_session(session_id))

    async def close_batch_session(self, session_id: str) -> int:
        return await self._send(close_batch_session(session_id))
