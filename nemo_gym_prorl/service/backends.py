# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The narrow interface the service uses to manage LLM backends at runtime, and its one
implementation: `PoolBackendRegistry`, a face over the LLM backend pool that rollouts use.

The service never routes generations itself: the agent loop picks backends from the pool
(least in flight, sticky per trajectory). Through this face the HTTP API adds, removes and
drains the very backends those rollouts are balanced over, and reports their health.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, Protocol, runtime_checkable
from urllib.parse import urlsplit

from pydantic import BaseModel, Field

from nemo_gym_prorl.llm.balancer import EndpointInfo
from nemo_gym_prorl.llm.policy import PolicyStatus, PublishReport, PublishRequest
from nemo_gym_prorl.llm.pool import LLMBackendPool, normalize_base_url


class BackendInfo(BaseModel):
    url: str
    healthy: bool | None = Field(None, description="None: not probed yet.")
    draining: bool = False
    in_flight: int = Field(0, description="Requests (or sticky trajectories) currently on it.")
    last_error: str | None = None
    options: dict[str, Any] = Field(default_factory=dict)


class BackendError(ValueError):
    """A bad backend URL or option (the API answers 400)."""


class BackendNotFoundError(LookupError):
    pass


@runtime_checkable
class BackendRegistry(Protocol):
    async def add(self, url: str, **opts: Any) -> BackendInfo:
        """Add (or re-enable) a backend; returns its info. Raises BackendError if invalid."""
        ...

    async def remove(self, url: str) -> bool:
        """Forget a backend at once; False if it was unknown. In-flight work may fail over."""
        ...

    async def drain(self, url: str) -> BackendInfo:
        """Stop giving it new work; it is removed once idle. Raises BackendNotFoundError."""
        ...

    async def list(self) -> list[BackendInfo]:
        """All backends with their health, newest information first available."""
        ...

    async def publish_policy(self, request: PublishRequest) -> PublishReport:
        """Load a new policy version on every healthy backend before new turns use it."""
        ...

    def policy_status(self) -> PolicyStatus:
        """The current version, turns in flight per version, versions loaded per backend."""
        ...

    async def aclose(self) -> None:
        """Release connections and background checks (the service is shutting down)."""
        ...


def normalize_url(url: str) -> str:
    """`host:port` or `http(s)://host:port[/path]` -> `scheme://host:port[/path]` (no trailing /)."""
    url = url.strip()
    if not url:
        raise BackendError("backend address is empty")
    if "://" not in url:
        url = f"http://{url}"
    try:
        parts = urlsplit(url)
        _ = parts.port  # raises for a non-numeric or out-of-range port
    except ValueError as exc:  # also malformed IPv6 brackets
        raise BackendError(f"malformed backend address {url!r}: {exc}") from exc
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise BackendError(f"backend address must be http(s)://host:port, got {url!r}")
    if any(ch.isspace() or ord(ch) < 32 for ch in url):
        raise BackendError(f"backend address contains whitespace or control characters: {url!r}")
    return url.rstrip("/")


class PoolBackendRegistry:
    """The LLM pool as the service sees it. Options per backend: `max_in_flight`."""

    OPTIONS = frozenset({"max_in_flight"})

    def __init__(self, pool: LLMBackendPool) -> None:
        self.pool = pool
        self._drains: set[asyncio.Task[bool]] = set()

    async def add(self, url: str, **opts: Any) -> BackendInfo:
        unknown = set(opts) - self.OPTIONS
        if unknown:
            raise BackendError(f"unknown backend options {sorted(unknown)}; known: {sorted(self.OPTIONS)}")
        max_in_flight = opts.get("max_in_flight")
        if max_in_flight is not None and (not isinstance(max_in_flight, int) or max_in_flight < 1):
            raise BackendError("max_in_flight must be a positive integer")
        address = normalize_base_url(normalize_url(url))
        await self.pool.add_backend(address, max_in_flight=max_in_flight)
        return self._info(address)

    async def remove(self, url: str) -> bool:
        address = normalize_base_url(normalize_url(url))
        if address not in self.pool.backends():
            return False
        self.pool.remove_backend(address)
        return True

    async def drain(self, url: str) -> BackendInfo:
        """Stop new trajectories at once; the backend is removed when its requests finish."""
        address = normalize_base_url(normalize_url(url))
        if address not in self.pool.backends():
            raise BackendNotFoundError(f"no backend {address!r}")
        task = asyncio.create_task(self.pool.drain_backend(address, remove=True))
        self._drains.add(task)
        task.add_done_callback(self._drains.discard)
        await asyncio.sleep(0)  # let the drain mark it before we report
        return self._info(address)

    async def list(self) -> list[BackendInfo]:
        return [_to_info(e) for e in self.pool.stats().endpoints]

    async def publish_policy(self, request: PublishRequest) -> PublishReport:
        return await self.pool.policy.publish(request.version, request.source())

    def policy_status(self) -> PolicyStatus:
        return self.pool.policy.status()

    async def aclose(self) -> None:
        for task in list(self._drains):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await self.pool.aclose()

    def _info(self, address: str) -> BackendInfo:
        for endpoint in self.pool.stats().endpoints:
            if endpoint.address == address:
                return _to_info(endpoint)
        return BackendInfo(url=address, healthy=None, draining=True)  # drained and removed already


def _to_info(endpoint: EndpointInfo) -> BackendInfo:
    return BackendInfo(
        url=endpoint.address,
        healthy=endpoint.healthy,
        draining=endpoint.draining,
        in_flight=endpoint.in_flight,
        last_error=endpoint.last_error,
        options={"max_in_flight": endpoint.max_in_flight},
    )
