# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The trainer's HTTP client for the rollout service: submit jobs, wait for them, publish a policy.

The service's own client (`nemo_gym_prorl.service.client`) needs the project's Python 3.13 venv;
this one runs in the model venv and speaks the same native `/v1` API with httpx:

- `POST /v1/rollouts {"jobs": [JobSpec, ...]}` -> 202 `{"ids": [...]}` (all accepted, or none);
- `POST /v1/rollouts/wait {"ids", "timeout_s" (<= 600), "mode": "all"}` -> `{"results": [JobResult],
  "pending": [id], "missing": {id: why}}` (a long poll; repeated until nothing is pending);
- `POST /v1/policy {"version": int, "adapter_path" | "weights_path": str}` -> 2xx: the
  policy-version contract the service implements: load the adapter directory (a PEFT
  `save_pretrained` directory) or reload the full checkpoint, readable by the backends, on every
  healthy backend as policy `version` (monotone), before any new turn uses it. An error answer
  means the old policy keeps serving;
- `DELETE /v1/rollouts/{id}`: cancel a rollout the trainer no longer waits for.

Errors come back as `ServiceError` with the HTTP status and the service's `error`/`reason`.

A request that gets no answer (a refused or cut connection, a timeout) is sent again after a
backoff (`RETRY`, the service client's policy: `nemo_gym_prorl.retry`) when repeating it cannot do anything twice: a wait, a cancel, and a
submit whose jobs carry their ids (the service takes an id it already has as the same job).
Publishing a policy is never repeated blindly.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from nemo_gym_prorl.retry import TRANSPORT

# The service caps one long poll at 600 s (`WaitRequest.timeout_s`).
MAX_WAIT_S = 600.0
# How a request that got no answer is tried again (read at each request).
RETRY = TRANSPORT


class ServiceError(RuntimeError):
    """An error answer (or no answer: `status` 0) to one request, naming the request."""

    def __init__(self, status: int, code: str, reason: str, *, request: str = "") -> None:
        super().__init__(
            f"{request}: HTTP {status} {code}: {reason}" if request else f"HTTP {status} {code}: {reason}"
        )
        self.status, self.code, self.reason = status, code, reason

    @classmethod
    def of(cls, response: httpx.Response) -> ServiceError:
        """The service's error body is `{"error": code, "reason": text}`; anything else is shown raw."""
        request = f"{response.request.method} {response.request.url.path}"
        body: Any = None
        if response.headers.get("content-type", "").startswith("application/json"):
            body = response.json()
        if isinstance(body, dict) and "error" in body:
            return cls(response.status_code, str(body["error"]), str(body.get("reason", "")), request=request)
        return cls(response.status_code, "error", response.text[:500], request=request)


class ServiceClient:
    """Synchronous (TRL calls `rollout_func` and callbacks synchronously)."""

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        timeout_s: float = 60.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"the service URL must start with http:// or https://, got {base_url!r}")
        self.base_url = base_url.rstrip("/")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(
            base_url=self.base_url, headers=headers, timeout=timeout_s, transport=transport
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> ServiceClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _request(self, method: str, path: str, *, repeatable: bool, **options: Any) -> httpx.Response:
        try:
            for attempt in RETRY.attempts(retry=repeatable):
                with attempt:
                    return self._http.request(method, path, **options)
        except httpx.TransportError as exc:
            raise ServiceError(0, "unreachable", f"{method} {self.base_url}{path}: {exc!r}") from exc
        raise AssertionError("unreachable")

    def _post(
        self, path: str, body: Mapping[str, Any], *, timeout_s: float | None = None, repeatable: bool = True
    ) -> Any:
        extra: dict[str, Any] = {"timeout": timeout_s} if timeout_s is not None else {}
        response = self._request("POST", path, repeatable=repeatable, json=dict(body), **extra)
        if response.status_code >= 400:
            raise ServiceError.of(response)
        return response.json() if response.content else {}

    def submit(self, jobs: Sequence[Mapping[str, Any]]) -> list[str]:
        """Jobs that all carry an `id` are submitted again on a lost answer; others only once."""
        repeatable = all(job.get("id") for job in jobs)
        return list(self._post("/v1/rollouts", {"jobs": list(jobs)}, repeatable=repeatable)["ids"])

    def wait_all(
        self, ids: Sequence[str], *, timeout_s: float
    ) -> tuple[list[dict[str, Any]], dict[str, str]]:
        """Results of every id that finishes within `timeout_s`, and {id: why} for the others
        (unknown or evicted, or still running at the deadline)."""
        deadline = time.monotonic() + timeout_s
        pending = list(dict.fromkeys(ids))
        results: list[dict[str, Any]] = []
        missing: dict[str, str] = {}
        while pending:
            left = deadline - time.monotonic()
            if left <= 0:
                missing.update(dict.fromkeys(pending, f"not finished within {timeout_s:.0f}s"))
                break
            poll = min(left, MAX_WAIT_S)
            body = {"ids": pending, "timeout_s": poll, "mode": "all"}
            answer = self._post("/v1/rollouts/wait", body, timeout_s=poll + 30)
            results += answer["results"]
            missing.update(answer.get("missing") or {})
            pending = [i for i in answer["pending"] if i not in missing]
        return results, missing

    def cancel(self, job_id: str) -> None:
        response = self._request("DELETE", f"/v1/rollouts/{job_id}", repeatable=True)
        if response.status_code >= 400:
            raise ServiceError.of(response)

    def publish_policy(
        self, version: int, adapter_path: str | None = None, *, weights_path: str | None = None
    ) -> Any:
        """`POST /v1/policy`: the policy as an adapter or as full weights (one of the two)."""
        body: dict[str, Any] = {"version": version}
        body.update({"weights_path": weights_path} if weights_path else {"adapter_path": adapter_path})
        return self._post("/v1/policy", body, repeatable=False)
