# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""What each rollout-API call sends and how its answer is read, with no I/O.

The sync `RolloutClient` and the asyncio `AsyncRolloutClient` share this one description of the
API; each only moves a `Call` (one answer) or a `StreamCall` (NDJSON lines) over its own httpx
client, so a change to a path, a body or a decoder is made once for both.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx

from nemo_gym_prorl.llm.policy import PublishReport
from nemo_gym_prorl.pipeline import JobResult, JobSpec
from nemo_gym_prorl.retry import TRANSPORT
from nemo_gym_prorl.service.backends import BackendInfo
from nemo_gym_prorl.service.client_errors import api_error
from nemo_gym_prorl.service.models import (
    PolicyResponse,
    ProcessRequest,
    ProcessResult,
    StatusResponse,
    StreamLine,
    WaitResponse,
)

JobLike = JobSpec | Mapping[str, Any]

# How a call that got no answer is tried again (only one that cannot do anything twice, `repeatable`)
# and how a cut result stream reconnects; both clients read it here at each call.
RETRY = TRANSPORT

# A call the server may hold open (`wait_s`, `timeout_s`) gets this much more read time, so the
# client never gives up before the server's own answer arrives.
_GRACE_S = 30.0


@dataclass(frozen=True)
class Call[T]:
    """One request and the decoder of its JSON answer."""

    method: str
    path: str
    decode: Callable[[Any], T]
    options: dict[str, Any] = field(default_factory=dict)  # json=, params= for httpx
    held_s: float | None = None  # how long the server may hold the answer; None: the client's timeout
    repeatable: bool = True  # sending it again after a lost answer does nothing twice

    def request_options(self) -> dict[str, Any]:
        timeout = {"timeout": self.held_s + _GRACE_S} if self.held_s is not None else {}
        return {**self.options, **timeout}

    def answer(self, response: httpx.Response) -> T:
        if response.status_code >= 400:
            raise api_error(response)
        return self.decode(response.json())


@dataclass(frozen=True)
class StreamCall[T]:
    """A request answered by NDJSON lines; `parse` turns a line into an item or None (skip it)."""

    method: str
    path: str
    parse: Callable[[str], T | None]
    timeout: float
    options: dict[str, Any] = field(default_factory=dict)

    def request_options(self) -> dict[str, Any]:
        return {**self.options, "timeout": self.timeout}


def ndjson_line(raw: str) -> Any | None:
    raw = raw.strip()
    return json.loads(raw) if raw else None


def _stream_result(raw: str) -> JobResult | None:
    data = ndjson_line(raw)
    line = StreamLine.model_validate(data) if data is not None else None
    return line.result if line is not None and line.type == "result" else None


def _backends(data: Any) -> list[BackendInfo]:
    return [BackendInfo.model_validate(b) for b in data["backends"]]


def submit(jobs: Sequence[JobLike]) -> Call[list[str]]:
    """Every job gets its id here when it has none: a submit sent again after a lost answer is
    then the same jobs, which the service already has (it takes a known id as the same job)."""
    specs = [j if isinstance(j, JobSpec) else JobSpec.model_validate(j) for j in jobs]
    specs = [s if s.id else s.model_copy(update={"id": uuid.uuid4().hex}) for s in specs]
    body = {"jobs": [s.model_dump(mode="json", exclude_none=True) for s in specs]}
    return Call("POST", "/v1/rollouts", lambda data: list(data["ids"]), {"json": body})


def get(job_id: str, wait_s: float) -> Call[JobResult]:
    return Call(
        "GET", f"/v1/rollouts/{job_id}", JobResult.model_validate, {"params": {"wait_s": wait_s}}, wait_s
    )


def wait(ids: Sequence[str], timeout_s: float, mode: Literal["all", "any"]) -> Call[WaitResponse]:
    body = {"ids": list(ids), "timeout_s": timeout_s, "mode": mode}
    return Call("POST", "/v1/rollouts/wait", WaitResponse.model_validate, {"json": body}, timeout_s)


def stream(ids: Sequence[str], timeout_s: float) -> StreamCall[JobResult]:
    """Results as they finish; the server's `missing` and `end` lines are not results."""
    body = {"ids": list(ids), "timeout_s": timeout_s}
    return StreamCall("POST", "/v1/rollouts/stream", _stream_result, timeout_s + _GRACE_S, {"json": body})


def cancel(job_id: str) -> Call[JobResult]:
    return Call("DELETE", f"/v1/rollouts/{job_id}", JobResult.model_validate)


def status() -> Call[StatusResponse]:
    return Call("GET", "/v1/status", StatusResponse.model_validate)


def backends() -> Call[list[BackendInfo]]:
    return Call("GET", "/v1/backends", _backends)


def add_backend(url: str, options: dict[str, Any]) -> Call[list[BackendInfo]]:
    return Call(
        "POST", "/v1/backends", _backends, {"json": {"url": url, "options": options}}, repeatable=False
    )


def remove_backend(url: str) -> Call[list[BackendInfo]]:
    return Call("DELETE", "/v1/backends", _backends, {"params": {"url": url}}, repeatable=False)


def drain_backend(url: str) -> Call[list[BackendInfo]]:
    return Call("POST", "/v1/backends/drain", _backends, {"json": {"url": url}})


def publish_policy(
    version: int, adapter_path: str | None = None, weights_path: str | None = None
) -> Call[PublishReport]:
    body = {"version": version, "adapter_path": adapter_path, "weights_path": weights_path}
    return Call("POST", "/v1/policy", PublishReport.model_validate, {"json": body}, repeatable=False)


def policy() -> Call[PolicyResponse]:
    return Call("GET", "/v1/policy", PolicyResponse.model_validate)


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


def process(
    instance: Mapping[str, Any],
    sampling_params: Mapping[str, Any] | None,
    job_id: str | None,
    timeout: float | None,
) -> Call[ProcessResult]:
    body = process_body(instance, sampling_params, job_id=job_id, timeout=timeout)
    # `/process` answers when the rollout is over: with no timeout of its own, allow a day.
    # Repeatable only with the caller's job id: without it a second try would be a second rollout.
    return Call(
        "POST",
        "/process",
        ProcessResult.model_validate,
        {"json": body},
        timeout or 86_400,
        job_id is not None,
    )
