"""The narrow interface the service uses to manage LLM backends at runtime.

The service never routes generations itself: the agent loop picks backends from the LLM pool
(nemo_gym_prorl/llm). The pool implements this protocol so the HTTP API can add, remove and
drain backends and report their health. `UrlBackendRegistry` is a plain, working registry for
running the service before (or without) that pool: it tracks URLs, drain flags and an HTTP
health probe, and picks nothing.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Protocol, runtime_checkable
from urllib.parse import urlsplit

import httpx
from pydantic import BaseModel, Field


class BackendInfo(BaseModel):
    url: str
    healthy: bool | None = Field(None, description="None: not probed yet.")
    draining: bool = False
    in_flight: int = Field(0, description="Requests (or sticky trajectories) currently on it.")
    last_error: str | None = None
    checked_at: float | None = Field(None, description="Unix time of the last health probe.")
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


class UrlBackendRegistry:
    """Backends as URLs with drain flags and an optional health probe (GET `health_path`)."""

    def __init__(self, *, health_path: str | None = "/health", probe_timeout_s: float = 2.0) -> None:
        self.health_path = health_path
        self.probe_timeout_s = probe_timeout_s
        self._backends: dict[str, BackendInfo] = {}
        self._lock = asyncio.Lock()

    async def add(self, url: str, **opts: Any) -> BackendInfo:
        key = normalize_url(url)
        async with self._lock:
            info = self._backends.get(key) or BackendInfo(url=key)
            info.draining = False
            info.options.update(opts)
            self._backends[key] = info
        return info.model_copy()

    async def remove(self, url: str) -> bool:
        key = normalize_url(url)
        async with self._lock:
            return self._backends.pop(key, None) is not None

    async def drain(self, url: str) -> BackendInfo:
        key = normalize_url(url)
        async with self._lock:
            info = self._backends.get(key)
            if info is None:
                raise BackendNotFoundError(f"no backend {key!r}")
            info.draining = True
            if info.in_flight == 0:  # nothing to wait for: gone now
                del self._backends[key]
            return info.model_copy()

    async def list(self) -> list[BackendInfo]:
        async with self._lock:
            return [b.model_copy() for b in self._backends.values()]

    def urls(self) -> list[str]:
        """Backends that may take new work."""
        return [b.url for b in self._backends.values() if not b.draining and b.healthy is not False]

    async def probe(self) -> None:
        """Refresh health of every backend concurrently (a failed probe marks it unhealthy)."""
        if self.health_path is None:
            return
        async with httpx.AsyncClient(timeout=self.probe_timeout_s) as client:
            infos = list(self._backends.values())
            await asyncio.gather(*(self._probe_one(client, info) for info in infos))

    async def _probe_one(self, client: httpx.AsyncClient, info: BackendInfo) -> None:
        try:
            response = await client.get(f"{info.url}{self.health_path}")
            info.healthy = response.status_code < 500
            info.last_error = None if info.healthy else f"HTTP {response.status_code}"
        except httpx.HTTPError as exc:
            info.healthy, info.last_error = False, f"{type(exc).__name__}: {exc}"
        info.checked_at = time.time()
