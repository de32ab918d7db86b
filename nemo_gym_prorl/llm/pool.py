# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The LLM backend pool: the generic `Balancer` plus HTTP, retries and health probes.

One pool fronts N OpenAI-compatible servers (vLLM, NeMo RL's policy server) that serve the
same model. Callers hand it a `Route` (one per trajectory) so that every turn is sticky, and
so that a move to another backend is written down on the trajectory itself.

Failure handling, in one place:
- connection refused/dropped: the backend is ejected at once and the request is retried on
  another backend (the token history lives in the client, so the continuation is exact);
- 5xx, timeouts, 2xx with garbage bodies: retried with backoff; each counts as a failure of
  that backend (enough of them eject it; each triggers a health probe);
- 4xx: the request is wrong, so it is raised at once (`BackendRejectedError`), never retried;
- every wait is bounded (acquire timeout, request timeout, attempt limit): nothing hangs.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

import aiohttp
import httpx
import orjson
from pydantic import BaseModel, Field

from nemo_gym_prorl.llm.balancer import Balancer, BalancerConfig, BalancerStats
from nemo_gym_prorl.llm.errors import (
    AllBackendsDownError,
    BackendError,
    BackendProtocolError,
    BackendRejectedError,
    BackendServerError,
    BackendTimeoutError,
    BackendUnavailableError,
    ContextLengthExceededError,
    RetriesExhaustedError,
)
from nemo_gym_prorl.llm.policy import PolicyVersions
from nemo_gym_prorl.llm.server_errors import SAME_500_LIMIT, is_request_refusal

log = logging.getLogger(__name__)

# vLLM's wording for an over-long prompt ("This model's maximum context length is N tokens...",
# also used for max_tokens that do not fit); NeMo RL's server is vLLM underneath.
_CONTEXT_RE = re.compile(r"maximum context length|context length|prompt is too long|max_model_len", re.I)


def normalize_base_url(url: str) -> str:
    """`http://h:p/v1/` and `http://h:p` name the same server: keep the root, since vLLM
    serves /tokenize and /health at the root and the OpenAI routes under /v1."""
    url = url.strip().rstrip("/")
    if url.endswith("/v1"):
        url = url[: -len("/v1")]
    if not url.startswith(("http://", "https://")):
        url = "http://" + url
    return url


class PoolConfig(BaseModel):
    """Configuration of an LLM backend pool (typed; composes from Hydra/OmegaConf dicts)."""

    backends: list[str] = Field(default_factory=list, description="base URLs, with or without /v1")
    balancer: BalancerConfig = Field(default_factory=BalancerConfig)
    request_timeout_s: float = Field(600.0, gt=0, description="one HTTP request, generation included")
    connect_timeout_s: float = Field(5.0, gt=0)
    max_attempts: int = Field(3, ge=1, description="attempts per logical request (first try included)")
    retry_backoff_s: float = Field(0.25, ge=0, description="first backoff; doubles per attempt")
    retry_backoff_max_s: float = Field(4.0, ge=0)
    health_path: str | None = Field(
        "/health", description="GET path of the probe; any status < 500 = alive; None: trust backends"
    )
    health_timeout_s: float = Field(2.0, gt=0)
    api_key: str | None = Field(None, description="sent as a Bearer token when set")
    api_key_file: Path | None = Field(
        None,
        description="a file holding the key instead (as `prorl model serve` writes it): read when the "
        "pool is made, so the key is in no configuration, command line or environment",
    )

    def resolved_api_key(self) -> str | None:
        """`api_key`, else the contents of `api_key_file`, else None."""
        if self.api_key is not None or self.api_key_file is None:
            return self.api_key
        try:
            return self.api_key_file.read_text().strip() or None
        except OSError as exc:
            raise ValueError(f"cannot read llm.api_key_file: {exc.strerror}") from None


@dataclass
class _Tries:
    """What the tries of one request learned: the errors, the backends that failed it (later
    tries prefer others), and whether the last try found every backend ejected."""

    errors: list[BackendError] = field(default_factory=list)
    failed: set[str] = field(default_factory=set)
    answered_500: set[str] = field(default_factory=set)  # distinct backends that answered a 5xx
    all_down: bool = False


def _retryable(exc: BaseException) -> bool:
    """Worth another try: a backend failed (not a request the server refused), or every backend
    is ejected for now (one may come back within the backoff)."""
    return isinstance(exc, AllBackendsDownError | BackendError) and not isinstance(exc, BackendRejectedError)


def _refused_request(exc: BackendServerError, address: str, tries: _Tries) -> BackendRejectedError | None:
    """NeMo RL's policy server answers a sampling mismatch with 500 on every rank: that is this
    request's error, not a sick backend (no health penalty, no spreading to other ranks)."""
    tries.answered_500.add(address)
    if is_request_refusal(exc.status or 0, exc.body) or (
        exc.status == 500 and len(tries.answered_500) >= SAME_500_LIMIT
    ):
        return BackendRejectedError(
            f"HTTP 500 from {len(tries.answered_500)} backend(s): {exc.message}"[:800],
            backend=address,
            status=exc.status,
            body=exc.body,
        )
    return None


class Reroute(BaseModel):
    """A trajectory left its backend: recorded on the trajectory for the training report."""

    turn: int
    from_backend: str
    to_backend: str
    reason: str
    at_unix_s: float


class Route(BaseModel):
    """Per-trajectory routing state: the sticky key, where it runs now, and its moves."""

    key: str
    backend: str | None = None
    turn: int = 0
    reroutes: list[Reroute] = Field(default_factory=list)
    attempts: int = 0  # HTTP attempts made for this trajectory, retries included
    retried: int = 0


class PoolReply(BaseModel):
    """One successful request: the parsed JSON body and where it was served."""

    data: Any
    backend: str
    attempts: int
    latency_s: float


# A health probe is a GET: it is asked again when a reused connection breaks under it.
_PROBE_ATTEMPTS = 3


class LLMBackendPool:
    """Balanced, health-checked, retrying access to replicated OpenAI-compatible servers.

    Use as `async with LLMBackendPool(PoolConfig(backends=[url])) as pool:`. Backends listed in
    the config are probed on entry; one that is down starts ejected and joins when it answers.
    """

    def __init__(self, config: PoolConfig | None = None, *, client: httpx.AsyncClient | None = None) -> None:
        self.config = config or PoolConfig()
        self._own_client = client is None
        self._client = client or httpx.AsyncClient(
            timeout=httpx.Timeout(self.config.request_timeout_s, connect=self.config.connect_timeout_s),
            # No pool-level connection cap: the balancer's per-backend caps are the limit that
            # matters, and a second, hidden queue in httpx would make waits unbounded.
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=256),
        )
        self.balancer = Balancer(self.config.balancer, probe=self.probe)
        self._api_key = self.config.resolved_api_key()
        # The policy versions the backends serve; the probe admits none without the current one.
        self.policy = PolicyVersions(self.balancer, self._client, api_key=self._api_key)
        # Model calls (generation, /tokenize) go through aiohttp, not httpx: httpx's pool walks
        # every connection and every request in flight on each request it starts and ends, so
        # at hundreds of calls in flight it took half the event loop. aiohttp's connector takes
        # an idle connection off a per-host queue. Made on first use (it needs the running loop).
        self._calls: aiohttp.ClientSession | None = None
        self._started = False

    @property
    def client(self) -> httpx.AsyncClient:
        """The pool's HTTP client, for one-off requests to a known backend (e.g. /v1/models,
        with `auth_headers`)."""
        return self._client

    @property
    def auth_headers(self) -> dict[str, str]:
        """What a request to a backend carries: its key, when the backends have one."""
        return {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}

    # --- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        if self._started:
            return
        self._started = True
        for url in self.config.backends:
            await self.add_backend(url)
        self.balancer.start()

    async def aclose(self) -> None:
        await self.balancer.close()
        await self.policy.aclose()
        if self._calls is not None:
            await self._calls.close()
            self._calls = None
        if self._own_client:
            await self._client.aclose()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # --- membership (runtime) -----------------------------------------------------------------

    async def add_backend(self, url: str, *, max_in_flight: int | None = None) -> bool:
        """Add a backend after one probe; returns whether it is healthy now. A backend that
        is down is still added (ejected) and the periodic check admits it when it answers."""
        address = normalize_base_url(url)
        probed = await self.probe(address)
        healthy = probed is True
        self.balancer.add(address, max_in_flight=max_in_flight, healthy=healthy)
        if not healthy:
            state = self.balancer.state(address)
            if state is not None:
                state.last_error = "down when added" if probed is False else "no answer in time when added"
            log.warning("backend %s is down; it joins when its health check passes", address)
        return healthy

    def remove_backend(self, url: str) -> None:
        self.balancer.remove(normalize_base_url(url))

    async def drain_backend(self, url: str, *, timeout_s: float | None = None, remove: bool = True) -> bool:
        return await self.balancer.drain(normalize_base_url(url), timeout_s=timeout_s, remove=remove)

    def backends(self) -> list[str]:
        return self.balancer.addresses()

    def stats(self) -> BalancerStats:
        return self.balancer.stats()

    def end_trajectory(self, route: Route) -> None:
        """Release the sticky binding of a finished trajectory."""
        self.balancer.forget(route.key)

    # --- health -------------------------------------------------------------------------------

    async def probe(self, address: str) -> bool | None:
        """Ready = alive, and serving the current policy version (loaded now if it is not).
        None: no answer within `health_timeout_s` (the balancer decides what that means)."""
        alive = await self._alive(address)
        if alive is not True:
            return alive
        return await self.policy.ready(address)

    async def _alive(self, address: str) -> bool | None:
        """Alive = the server answers HTTP below 500 on `health_path` (vLLM: /health is 200;
        NeMo RL's policy server has no /health route, and its 404 still proves it is up).
        None = no answer in time: a server busy generating can be slow to answer."""
        if self.config.health_path is None:
            return True
        probe = address + self.config.health_path
        for attempt in range(_PROBE_ATTEMPTS):
            try:
                response = await self._client.get(probe, timeout=self.config.health_timeout_s)
            except httpx.TimeoutException:
                return None
            except httpx.TransportError as exc:
                # A kept-alive connection the server closed as we reused it (both sides' idle
                # limits are 5 s by default): the server is fine, ask again on a new connection.
                # Refused is final: nothing listens there.
                if isinstance(exc, httpx.ConnectError) or attempt + 1 == _PROBE_ATTEMPTS:
                    return self._probe_failed(address, f"GET {probe}: {type(exc).__name__}: {exc}")
            except httpx.HTTPError as exc:
                return self._probe_failed(address, f"GET {probe}: {type(exc).__name__}: {exc}")
            else:
                if response.status_code >= 500:
                    return self._probe_failed(address, f"GET {probe} answered {response.status_code}")
                return True
        return False

    def _probe_failed(self, address: str, reason: str) -> bool:
        """False, with the reason kept on the endpoint: the balancer logs it when it ejects."""
        if (state := self.balancer.state(address)) is not None:
            state.last_error = reason
        return False

    # --- requests -----------------------------------------------------------------------------

    async def post_json[T](
        self,
        path: str,
        body: dict[str, Any],
        *,
        route: Route | None = None,
        parse: Callable[[Any], T] | None = None,
        timeout_s: float | None = None,
    ) -> tuple[T, PoolReply]:
        """POST `body` to `path` on a backend picked for `route`, with bounded retries.

        `parse` validates the JSON body; a ValueError/KeyError/TypeError/IndexError from it
        (pydantic's ValidationError included) turns into `BackendProtocolError`: the attempt
        counts as a backend failure and is retried (a garbage answer is the backend's fault).
        Returns the parsed value and the reply metadata.
        """
        tries = _Tries()
        # A plain loop, not tenacity: its retry objects are reference cycles (a Condition, a
        # thread-local, bound methods), a score of objects per request left to the cyclic
        # collector, whose passes then stopped a worker's event loop for tens of milliseconds.
        attempt = 0
        while True:
            attempt += 1
            try:
                return await self._attempt(path, body, route, parse, timeout_s, attempt, tries)
            except Exception as exc:
                if not _retryable(exc):
                    raise
                if attempt >= self.config.max_attempts:
                    if isinstance(exc, AllBackendsDownError):
                        raise
                    break  # a backend failed on the last attempt: summarised below
            await asyncio.sleep(self._backoff_s(attempt))
        summary = (
            "; ".join(f"{e.backend}: {type(e).__name__}: {e.message}" for e in tries.errors)
            or "no attempt ran"
        )
        raise RetriesExhaustedError(
            f"{path} failed after {self.config.max_attempts} attempts: {summary}", tries.errors
        )

    def _backoff_s(self, failed_attempts: int) -> float:
        """The wait before the next attempt: `retry_backoff_s`, doubled per failed attempt, at
        most `retry_backoff_max_s`."""
        config = self.config
        return min(config.retry_backoff_max_s, config.retry_backoff_s * 2 ** (failed_attempts - 1))

    async def _attempt[T](
        self,
        path: str,
        body: dict[str, Any],
        route: Route | None,
        parse: Callable[[Any], T] | None,
        timeout_s: float | None,
        attempt: int,
        tries: _Tries,
    ) -> tuple[T, PoolReply]:
        """One try of `post_json`; a `BackendError` it raises is recorded in `tries`."""
        if tries.all_down:
            # The previous try found every backend ejected. One may be restarting: the wait
            # just spent gave it time; probe them all before picking.
            await self.balancer.probe_all()
        try:
            lease = await self.balancer.acquire(route.key if route else None, avoid=tries.failed)
        except AllBackendsDownError:
            tries.all_down = True
            raise
        tries.all_down = False
        if route is not None:
            self._record_route(route, lease.address, lease.moved_from, lease.move_reason)
            route.attempts += 1
            if attempt > 1:
                route.retried += 1
        started = time.monotonic()
        try:
            data = await self._post_once(lease.address, path, body, timeout_s)
            try:
                value: T = parse(data) if parse is not None else data
            except (ValueError, KeyError, TypeError, IndexError) as exc:
                raise BackendProtocolError(
                    f"unexpected response shape: {exc!r}"[:500],
                    backend=lease.address,
                    body=str(data)[:2000],
                ) from exc
        except BackendRejectedError:
            # The server is fine; the request is not. Not a health signal, not retryable.
            self.balancer.release(lease, ok=True)
            raise
        except BackendError as exc:
            self.balancer.release(lease, ok=True)  # counted below, with the right severity
            if isinstance(exc, BackendServerError):
                refused = _refused_request(exc, lease.address, tries)
                if refused is not None:
                    raise refused from exc
            self.balancer.report_failure(
                lease.address,
                f"{type(exc).__name__}: {exc.message}",
                fatal=isinstance(exc, BackendUnavailableError),
            )
            tries.errors.append(exc)
            tries.failed.add(lease.address)
            log.warning(
                "attempt %d/%d on %s failed: %s", attempt, self.config.max_attempts, lease.address, exc
            )
            raise
        except BaseException:
            self.balancer.release(lease, ok=True)  # cancellation etc.: not the backend's fault
            raise
        self.balancer.release(lease, ok=True)
        reply = PoolReply(
            data=data, backend=lease.address, attempts=attempt, latency_s=time.monotonic() - started
        )
        return value, reply

    def _call_session(self) -> aiohttp.ClientSession:
        if self._calls is None or self._calls.closed:
            self._calls = aiohttp.ClientSession(
                # No connection cap here: the balancer's per-backend caps are the limit that
                # matters, and a second, hidden queue would make waits unbounded.
                connector=aiohttp.TCPConnector(limit=0, keepalive_timeout=30),
                timeout=aiohttp.ClientTimeout(
                    total=self.config.request_timeout_s, sock_connect=self.config.connect_timeout_s
                ),
            )
        return self._calls

    async def _post_once(self, address: str, path: str, body: dict[str, Any], timeout_s: float | None) -> Any:
        # orjson: a turn's prompt and reply are thousands of token ids each way, and the standard
        # library's JSON took a good share of the event loop's time at a thousand rollouts.
        kwargs: dict[str, Any] = {
            "data": orjson.dumps(body, option=orjson.OPT_NON_STR_KEYS),
            "headers": {**self.auth_headers, "Content-Type": "application/json"},
        }
        if timeout_s is not None:  # else the session's (an explicit None would mean none at all)
            kwargs["timeout"] = aiohttp.ClientTimeout(
                total=timeout_s, sock_connect=self.config.connect_timeout_s
            )
        try:
            async with self._call_session().post(address + path, **kwargs) as response:
                status = response.status
                raw = await response.read()
        except TimeoutError as exc:
            raise BackendTimeoutError(f"timed out: {exc!r}", backend=address) from exc
        except aiohttp.ClientConnectionError as exc:
            raise BackendUnavailableError(f"connection failed: {exc!r}", backend=address) from exc
        except aiohttp.ClientError as exc:
            raise BackendUnavailableError(f"HTTP error: {exc!r}", backend=address) from exc
        if status >= 500:
            text = raw.decode(errors="replace")
            raise BackendServerError(
                f"HTTP {status}: {text[:300]}", backend=address, status=status, body=text
            )
        if status >= 400:
            text = raw.decode(errors="replace")
            cls = ContextLengthExceededError if _CONTEXT_RE.search(text) else BackendRejectedError
            raise cls(f"HTTP {status}: {text[:500]}", backend=address, status=status, body=text)
        return reply_json(raw, address, status)

    @staticmethod
    def _record_route(route: Route, address: str, moved_from: str | None, reason: str | None) -> None:
        if moved_from is not None and moved_from != address:
            route.reroutes.append(
                Reroute(
                    turn=route.turn,
                    from_backend=moved_from,
                    to_backend=address,
                    reason=reason or "moved",
                    at_unix_s=time.time(),
                )
            )
        route.backend = address


def reply_json(raw: bytes, address: str, status: int) -> Any:
    """A backend's reply body; the standard library's parser where orjson refuses one that is
    still Python's JSON (NaN, Infinity: a log-prob of -inf)."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        pass
    text = raw.decode(errors="replace")
    try:
        return json.loads(text)
    except ValueError as exc:
        raise BackendProtocolError(
            f"HTTP {status} with a body that is not JSON: {text[:200]!r}",
            backend=address,
            status=status,
            body=text,
        ) from exc
