# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Python clients for trainers: `RolloutClient` (sync) and `AsyncRolloutClient` (asyncio), httpx.

Both speak the native `/v1` API (submit, get, wait, stream, cancel, backends, status) and
ProRL's `/process`. Errors come back as `RolloutAPIError` with the server's code and reason.

    with RolloutClient("http://127.0.0.1:8000", token=...) as client:
        ids = client.submit([{"task": "math", "instance": row}])
        for result in client.stream(ids):
            ...
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any, Literal

import httpx

from nemo_gym_prorl.pipeline import JobResult, JobSpec
from nemo_gym_prorl.service.backends import BackendInfo
from nemo_gym_prorl.service.batches_client import AsyncBatchesClientMixin, BatchesClientMixin
from nemo_gym_prorl.service.client_errors import api_error
from nemo_gym_prorl.service.models import (
    ProcessRequest,
    ProcessResult,
    StatusResponse,
    StreamLine,
    WaitResponse,
)

JobLike = JobSpec | Mapping[str, Any]


def _headers(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


def _jobs_body(jobs: Sequence[JobLike]) -> dict[str, Any]:
    specs = [j if isinstance(j, JobSpec) else JobSpec.model_validate(j) for j in jobs]
    return {"jobs": [s.model_dump(mode="json", exclude_none=True) for s in specs]}


def _check(response: httpx.Response) -> Any:
    if response.status_code >= 400:
        raise api_error(response)
    return response.json()


def _parse_line(raw: str) -> StreamLine | None:
    raw = raw.strip()
    return StreamLine.model_validate(json.loads(raw)) if raw else None


def process_body(
    instance: Mapping[str, Any],
    sampling_params: Mapping[str, Any] | None,
    *,
    job_id: str | None,
    timeout: float | None,
) -> dict[str, Any]:
    """ProRL's `/process` request, validated before it leaves the client."""
    return ProcessRequest(
        instance=dict(instance),
        sampling_params=dict(sampling_params or {}),
        job_id=job_id,
        timeout=timeout,
    ).model_dump(mode="json", exclude_none=True)


class RolloutClient(BatchesClientMixin):
    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        timeout: float = 60.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._http = httpx.Client(
            base_url=base_url.rstrip("/"), headers=_headers(token), timeout=timeout, transport=transport
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> RolloutClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, method: str, path: str, *, timeout: float | None = None, **kw: Any) -> Any:
        extra = {"timeout": timeout + 30} if timeout is not None else {}
        return _check(self._http.request(method, path, **kw, **extra))

    # -- native API -------------------------------------------------------------------------
    def submit(self, jobs: Sequence[JobLike]) -> list[str]:
        return list(self._call("POST", "/v1/rollouts", json=_jobs_body(jobs))["ids"])

    def get(self, job_id: str, *, wait_s: float = 0.0) -> JobResult:
        data = self._call("GET", f"/v1/rollouts/{job_id}", params={"wait_s": wait_s}, timeout=wait_s)
        return JobResult.model_validate(data)

    def wait(
        self, ids: Sequence[str], *, timeout_s: float = 30.0, mode: Literal["all", "any"] = "all"
    ) -> WaitResponse:
        body = {"ids": list(ids), "timeout_s": timeout_s, "mode": mode}
        return WaitResponse.model_validate(
            self._call("POST", "/v1/rollouts/wait", json=body, timeout=timeout_s)
        )

    def stream(self, ids: Sequence[str], *, timeout_s: float = 3600.0) -> Iterator[JobResult]:
        """Results as they finish (NDJSON); stops at the server's end line."""
        body = {"ids": list(ids), "timeout_s": timeout_s}
        with self._http.stream("POST", "/v1/rollouts/stream", json=body, timeout=timeout_s + 30) as response:
            if response.status_code >= 400:
                response.read()
                _check(response)
            for raw in response.iter_lines():
                line = _parse_line(raw)
                if line is not None and line.type == "result" and line.result is not None:
                    yield line.result

    def run(self, jobs: Sequence[JobLike], *, timeout_s: float = 3600.0) -> list[JobResult]:
        """Submit and collect every result, in submission order."""
        ids = self.submit(jobs)
        by_id = {r.id: r for r in self.stream(ids, timeout_s=timeout_s)}
        return [by_id[i] if i in by_id else self.get(i) for i in ids]

    def cancel(self, job_id: str) -> JobResult:
        return JobResult.model_validate(self._call("DELETE", f"/v1/rollouts/{job_id}"))

    def status(self) -> StatusResponse:
        return StatusResponse.model_validate(self._call("GET", "/v1/status"))

    def backends(self) -> list[BackendInfo]:
        return [BackendInfo.model_validate(b) for b in self._call("GET", "/v1/backends")["backends"]]

    def add_backend(self, url: str, **options: Any) -> list[BackendInfo]:
        data = self._call("POST", "/v1/backends", json={"url": url, "options": options})
        return [BackendInfo.model_validate(b) for b in data["backends"]]

    def remove_backend(self, url: str) -> list[BackendInfo]:
        data = self._call("DELETE", "/v1/backends", params={"url": url})
        return [BackendInfo.model_validate(b) for b in data["backends"]]

    def drain_backend(self, url: str) -> list[BackendInfo]:
        data = self._call("POST", "/v1/backends/drain", json={"url": url})
        return [BackendInfo.model_validate(b) for b in data["backends"]]

    # -- ProRL-compatible -------------------------------------------------------------------
    def process(
        self,
        instance: Mapping[str, Any],
        sampling_params: Mapping[str, Any] | None = None,
        *,
        job_id: str | None = None,
        timeout: float | None = None,
    ) -> ProcessResult:
        body = process_body(instance, sampling_params, job_id=job_id, timeout=timeout)
        return ProcessResult.model_validate(
            self._call("POST", "/process", json=body, timeout=timeout if timeout else 86_400)
        )


class AsyncRolloutClient(AsyncBatchesClientMixin):
    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        timeout: float = 60.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._http = httpx.AsyncClient(
            base_url=base_url.rstrip("/"), headers=_headers(token), timeout=timeout, transport=transport
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncRolloutClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _call(self, method: str, path: str, *, timeout: float | None = None, **kw: Any) -> Any:
        extra = {"timeout": timeout + 30} if timeout is not None else {}
        return _check(await self._http.request(method, path, **kw, **extra))

    async def submit(self, jobs: Sequence[JobLike]) -> list[str]:
        return list((await self._call("POST", "/v1/rollouts", json=_jobs_body(jobs)))["ids"])

    async def get(self, job_id: str, *, wait_s: float = 0.0) -> JobResult:
        data = await self._call("GET", f"/v1/rollouts/{job_id}", params={"wait_s": wait_s}, timeout=wait_s)
        return JobResult.model_validate(data)

    async def wait(
        self, ids: Sequence[str], *, timeout_s: float = 30.0, mode: Literal["all", "any"] = "all"
    ) -> WaitResponse:
        body = {"ids": list(ids), "timeout_s": timeout_s, "mode": mode}
        return WaitResponse.model_validate(
            await self._call("POST", "/v1/rollouts/wait", json=body, timeout=timeout_s)
        )

    async def stream(self, ids: Sequence[str], *, timeout_s: float = 3600.0) -> AsyncIterator[JobResult]:
        body = {"ids": list(ids), "timeout_s": timeout_s}
        async with self._http.stream(
            "POST", "/v1/rollouts/stream", json=body, timeout=timeout_s + 30
        ) as response:
            if response.status_code >= 400:
                await response.aread()
                _check(response)
            async for raw in response.aiter_lines():
                line = _parse_line(raw)
                if line is not None and line.type == "result" and line.result is not None:
                    yield line.result

    async def run(self, jobs: Sequence[JobLike], *, timeout_s: float = 3600.0) -> list[JobResult]:
        ids = await self.submit(jobs)
        by_id = {r.id: r async for r in self.stream(ids, timeout_s=timeout_s)}
        return [by_id[i] if i in by_id else await self.get(i) for i in ids]

    async def cancel(self, job_id: str) -> JobResult:
        return JobResult.model_validate(await self._call("DELETE", f"/v1/rollouts/{job_id}"))

    async def status(self) -> StatusResponse:
        return StatusResponse.model_validate(await self._call("GET", "/v1/status"))

    async def backends(self) -> list[BackendInfo]:
        return [BackendInfo.model_validate(b) for b in (await self._call("GET", "/v1/backends"))["backends"]]

    async def add_backend(self, url: str, **options: Any) -> list[BackendInfo]:
        data = await self._call("POST", "/v1/backends", json={"url": url, "options": options})
        return [BackendInfo.model_validate(b) for b in data["backends"]]

    async def remove_backend(self, url: str) -> list[BackendInfo]:
        data = await self._call("DELETE", "/v1/backends", params={"url": url})
        return [BackendInfo.model_validate(b) for b in data["backends"]]

    async def drain_backend(self, url: str) -> list[BackendInfo]:
        data = await self._call("POST", "/v1/backends/drain", json={"url": url})
        return [BackendInfo.model_validate(b) for b in data["backends"]]

    async def process(
        self,
        instance: Mapping[str, Any],
        sampling_params: Mapping[str, Any] | None = None,
        *,
        job_id: str | None = None,
        timeout: float | None = None,
    ) -> ProcessResult:
        body = process_body(instance, sampling_params, job_id=job_id, timeout=timeout)
        return ProcessResult.model_validate(
            await self._call("POST", "/process", json=body, timeout=timeout if timeout else 86_400)
        )
