# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Python clients for trainers: `RolloutClient` (sync) and `AsyncRolloutClient` (asyncio), httpx.

Both speak the native `/v1` API (submit, get, wait, stream, cancel, backends, status) and
ProRL's `/process`. Errors come back as `RolloutAPIError` with the server's code and reason.

    with RolloutClient("http://127.0.0.1:8000", token=...) as client:
        ids = client.submit([{"task": "math", "instance": row}])
        for result in client.stream(ids):
            ...

What each call sends and how its answer is read lives once, in `client_requests`; the two
classes differ only in how they move a request (`_send`, `_lines`).

Across a bad network: a call that gets no answer is sent again after a backoff when that cannot
do anything twice (`Call.repeatable`; every submitted job carries its id, so a submit is), and a
result stream cut mid-way reconnects for the jobs it has not delivered yet: nothing is lost and
nothing comes twice.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any, Literal

import httpx

from nemo_gym_prorl.llm.policy import PublishReport
from nemo_gym_prorl.pipeline import JobResult
from nemo_gym_prorl.service import client_requests as api
from nemo_gym_prorl.service.backends import BackendInfo
from nemo_gym_prorl.service.batches_client import AsyncBatchesClientMixin, BatchesClientMixin
from nemo_gym_prorl.service.client_errors import api_error
from nemo_gym_prorl.service.client_requests import Call, JobLike, StreamCall, process_body
from nemo_gym_prorl.service.models import PolicyResponse, ProcessResult, StatusResponse, WaitResponse

__all__ = ["AsyncRolloutClient", "JobLike", "RolloutClient", "process_body"]

Mode = Literal["all", "any"]
Row = Mapping[str, Any]  # a dataset row, e.g. ProRL's instance
Params = Mapping[str, Any] | None
Id = str | None
Seconds = float | None
SyncTransport = httpx.BaseTransport | None
AsyncTransport = httpx.AsyncBaseTransport | None


def _client_options(base_url: str, token: str | None, timeout: float) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return {"base_url": base_url.rstrip("/"), "headers": headers, "timeout": timeout}


class RolloutClient(BatchesClientMixin):
    def __init__(
        self, base_url: str, *, token: Id = None, timeout: float = 60.0, transport: SyncTransport = None
    ) -> None:
        self._http = httpx.Client(**_client_options(base_url, token, timeout), transport=transport)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> RolloutClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _send[T](self, call: Call[T]) -> T:
        for attempt in api.RETRY.attempts(retry=call.repeatable):
            with attempt:
                return call.answer(self._http.request(call.method, call.path, **call.request_options()))
        raise AssertionError("unreachable")

    def _lines[T](self, call: StreamCall[T]) -> Iterator[T]:
        with self._http.stream(call.method, call.path, **call.request_options()) as response:
            if response.status_code >= 400:
                response.read()
                raise api_error(response)
            for raw in response.iter_lines():
                if (item := call.parse(raw)) is not None:
                    yield item

    def submit(self, jobs: Sequence[JobLike]) -> list[str]:
        return self._send(api.submit(jobs))

    def get(self, job_id: str, *, wait_s: float = 0.0) -> JobResult:
        return self._send(api.get(job_id, wait_s))

    def wait(self, ids: Sequence[str], *, timeout_s: float = 30.0, mode: Mode = "all") -> WaitResponse:
        return self._send(api.wait(ids, timeout_s, mode))

    def stream(self, ids: Sequence[str], *, timeout_s: float = 3600.0) -> Iterator[JobResult]:
        """Results as they finish (NDJSON); stops at the server's end line. A cut stream
        reconnects for the ids it has not delivered yet."""
        left = dict.fromkeys(ids)
        for attempt in api.RETRY.attempts():
            with attempt:
                for result in self._lines(api.stream(list(left), timeout_s)):
                    if result.id in left:
                        del left[result.id]
                        yield result

    def run(self, jobs: Sequence[JobLike], *, timeout_s: float = 3600.0) -> list[JobResult]:
        """Submit and collect every result, in submission order."""
        ids = self.submit(jobs)
        by_id = {r.id: r for r in self.stream(ids, timeout_s=timeout_s)}
        return [by_id[i] if i in by_id else self.get(i) for i in ids]

    def cancel(self, job_id: str) -> JobResult:
        return self._send(api.cancel(job_id))

    def status(self) -> StatusResponse:
        return self._send(api.status())

    def backends(self) -> list[BackendInfo]:
        return self._send(api.backends())

    def publish_policy(
        self, version: int, adapter_path: str | None = None, *, weights_path: str | None = None
    ) -> PublishReport:
        """Every healthy backend loads the adapter (or reloads the full weights) as `version`
        before new turns use it."""
        return self._send(api.publish_policy(version, adapter_path, weights_path))

    def policy(self) -> PolicyResponse:
        return self._send(api.policy())

    def add_backend(self, url: str, **options: Any) -> list[BackendInfo]:
        return self._send(api.add_backend(url, options))

    def remove_backend(self, url: str) -> list[BackendInfo]:
        return self._send(api.remove_backend(url))

    def drain_backend(self, url: str) -> list[BackendInfo]:
        return self._send(api.drain_backend(url))

    def process(
        self, instance: Row, sampling_params: Params = None, *, job_id: Id = None, timeout: Seconds = None
    ) -> ProcessResult:
        """ProRL-compatible: one instance in, its scored result out."""
        return self._send(api.process(instance, sampling_params, job_id, timeout))


class AsyncRolloutClient(AsyncBatchesClientMixin):
    def __init__(
        self, base_url: str, *, token: Id = None, timeout: float = 60.0, transport: AsyncTransport = None
    ) -> None:
        self._http = httpx.AsyncClient(**_client_options(base_url, token, timeout), transport=transport)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncRolloutClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _send[T](self, call: Call[T]) -> T:
        async for attempt in api.RETRY.attempts_async(retry=call.repeatable):
            with attempt:
                return call.answer(await self._http.request(call.method, call.path, **call.request_options()))
        raise AssertionError("unreachable")

    async def _lines[T](self, call: StreamCall[T]) -> AsyncIterator[T]:
        async with self._http.stream(call.method, call.path, **call.request_options()) as response:
            if response.status_code >= 400:
                await response.aread()
                raise api_error(response)
            async for raw in response.aiter_lines():
                if (item := call.parse(raw)) is not None:
                    yield item

    async def submit(self, jobs: Sequence[JobLike]) -> list[str]:
        return await self._send(api.submit(jobs))

    async def get(self, job_id: str, *, wait_s: float = 0.0) -> JobResult:
        return await self._send(api.get(job_id, wait_s))

    async def wait(self, ids: Sequence[str], *, timeout_s: float = 30.0, mode: Mode = "all") -> WaitResponse:
        return await self._send(api.wait(ids, timeout_s, mode))

    async def stream(self, ids: Sequence[str], *, timeout_s: float = 3600.0) -> AsyncIterator[JobResult]:
        """Results as they finish; a cut stream reconnects for the ids not delivered yet."""
        left = dict.fromkeys(ids)
        async for attempt in api.RETRY.attempts_async():
            with attempt:
                async for result in self._lines(api.stream(list(left), timeout_s)):
                    if result.id in left:
                        del left[result.id]
                        yield result

    async def run(self, jobs: Sequence[JobLike], *, timeout_s: float = 3600.0) -> list[JobResult]:
        ids = await self.submit(jobs)
        by_id = {r.id: r async for r in self.stream(ids, timeout_s=timeout_s)}
        return [by_id[i] if i in by_id else await self.get(i) for i in ids]

    async def cancel(self, job_id: str) -> JobResult:
        return await self._send(api.cancel(job_id))

    async def status(self) -> StatusResponse:
        return await self._send(api.status())

    async def backends(self) -> list[BackendInfo]:
        return await self._send(api.backends())

    async def publish_policy(
        self, version: int, adapter_path: str | None = None, *, weights_path: str | None = None
    ) -> PublishReport:
        """Every healthy backend loads the adapter (or reloads the full weights) as `version`
        before new turns use it."""
        return await self._send(api.publish_policy(version, adapter_path, weights_path))

    async def policy(self) -> PolicyResponse:
        return await self._send(api.policy())

    async def add_backend(self, url: str, **options: Any) -> list[BackendInfo]:
        return await self._send(api.add_backend(url, options))

    async def remove_backend(self, url: str) -> list[BackendInfo]:
        return await self._send(api.remove_backend(url))

    async def drain_backend(self, url: str) -> list[BackendInfo]:
        return await self._send(api.drain_backend(url))

    async def process(
        self, instance: Row, sampling_params: Params = None, *, job_id: Id = None, timeout: Seconds = None
    ) -> ProcessResult:
        return await self._send(api.process(instance, sampling_params, job_id, timeout))
