# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Policy versions: which trained policy the backends serve, and which one each turn used.

A trainer publishes version N in one of two forms, both read by the backends themselves:
- a LoRA adapter directory (PEFT `save_pretrained`): every healthy backend loads it through
  vLLM's runtime LoRA API (`--enable-lora`, `VLLM_ALLOW_RUNTIME_LORA_UPDATING=True`) under the
  name `policy-vN`, and only then do new turns ask for that name. Several versions can be served
  at once, so turns of the old policy finish on it while new turns use the new one;
- full weights (a checkpoint directory, e.g. an adapter merged into its base): every healthy
  backend reloads its base weights in place (vLLM's `reload_weights`, reached through
  `POST /collective_rpc` when the server runs with `VLLM_SERVER_DEV_MODE=1`) and drops its
  prefix cache. One set of base weights is served at a time, so the publish first stops new
  turns and waits for those in flight to end: no token is ever sampled by weights other than
  the ones its turn records. Served without an adapter, such a policy generates at the base
  model's speed (on vLLM-CPU 3-6x faster than the same policy as a runtime LoRA).

An adapter published after full weights is served over them (its `base_version` says which).
Guarantees:
- a backend that fails to load a version is ejected (and reported), so it never serves the old
  policy silently; the pool's health probe loads the current version (and the weights it is
  served over) before re-admitting any backend (one that joins, restarts or recovers), and keeps
  it out while the load fails;
- if no backend loads it (a bad path, say), the publish fails and the old version keeps serving;
- a turn holds its version from start to end (`acquire` / `release`); an adapter version that is
  not current and held by no turn is unloaded, so backends keep the current version plus the
  ones turns still use.

Versions start at 1: the base model (nothing published) is version None on a turn, and counts
as 0 for staleness (`nemo_gym_prorl.llm.staleness`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict, Field, model_validator

from nemo_gym_prorl.llm.balancer import Balancer
from nemo_gym_prorl.llm.errors import InferenceError

log = logging.getLogger(__name__)

SERVED_NAME_FORMAT = "policy-v{version}"


# A vLLM without runtime LoRA answers the route itself with 404 {"detail": "Not Found"}.
_NO_LORA_ROUTE = (
    "the backend has no runtime LoRA API: start vLLM with --enable-lora --max-lora-rank R and "
    "VLLM_ALLOW_RUNTIME_LORA_UPDATING=True"
)

# A vLLM without development mode answers /collective_rpc with 404 {"detail": "Not Found"}.
_NO_RELOAD_ROUTE = (
    "the backend cannot reload weights in place: start vLLM with VLLM_SERVER_DEV_MODE=1 "
    "(it serves /collective_rpc and /reset_prefix_cache)"
)


class PolicyError(InferenceError):
    """A policy could not be published. The caller's request is at fault or the backends
    refused it; the policy serving before keeps serving."""

    infrastructure = False


class PolicyVersionError(PolicyError):
    """The version is not greater than the current one (versions only move forward)."""


class PolicyLoadError(PolicyError):
    """No backend loaded the new version; `report` says why for each one."""

    def __init__(self, message: str, report: PublishReport) -> None:
        super().__init__(message)
        self.report = report


class PolicySource(BaseModel):
    """Where a policy version's parameters are: a LoRA adapter directory or full weights,
    as a path the backends can read (they load it themselves)."""

    model_config = ConfigDict(extra="forbid")

    adapter_path: str | None = Field(None, description="a PEFT save_pretrained directory")
    weights_path: str | None = Field(None, description="a full checkpoint directory")

    @model_validator(mode="after")
    def _exactly_one(self) -> PolicySource:
        given = [p for p in (self.adapter_path, self.weights_path) if p]
        if len(given) != 1:
            raise ValueError("give exactly one of adapter_path and weights_path (a non-empty path)")
        return self

    @property
    def path(self) -> str:
        return self.adapter_path or self.weights_path or ""


class PublishRequest(PolicySource):
    """A publish as a trainer sends it (the body of the service's policy endpoint)."""

    version: int = Field(ge=1, description="greater than every version published before")

    def source(self) -> PolicySource:
        return PolicySource(adapter_path=self.adapter_path, weights_path=self.weights_path)


class PolicyVersion(BaseModel):
    """A published policy: its version, what it was loaded from, the name it is served under."""

    version: int = Field(ge=1)
    served_name: str | None = Field(
        description="the adapter's name (None: full weights, served as the base model)"
    )
    source: PolicySource
    base_version: int | None = Field(
        None, description="an adapter: the full-weights version it is served over (None: the launch weights)"
    )
    published_at_unix_s: float

    @property
    def is_weights(self) -> bool:
        return self.source.weights_path is not None


class BackendLoad(BaseModel):
    """What one backend did with a published version."""

    backend: str
    loaded: bool
    reason: str | None = Field(None, description="why the load failed")
    ejected: bool = Field(False, description="taken out of rotation until it loads the version")
    latency_s: float = 0.0


class PublishReport(BaseModel):
    """The outcome of one publish, per backend."""

    version: int
    served_name: str | None
    previous_version: int | None
    backends: list[BackendLoad]
    unloaded: list[str] = Field(default_factory=list, description="served names unloaded afterwards")
    drained_s: float = Field(0.0, description="full weights: how long new turns waited for those in flight")

    @property
    def loaded(self) -> list[str]:
        return [b.backend for b in self.backends if b.loaded]

    @property
    def failed(self) -> list[str]:
        return [b.backend for b in self.backends if not b.loaded]


class PolicyStatus(BaseModel):
    """What the pool serves now: the current version, turns in flight per version, and the
    versions loaded on each backend."""

    current: PolicyVersion | None
    in_use: dict[int, int]
    loaded: dict[str, list[int]]


@dataclass
class PolicyLease:
    """The version one turn uses, held from the turn's start to its end. `model` is the name
    to request (None: the base model's name, which serves the launch or published weights)."""

    version: int | None
    model: str | None
    released: bool = False


class PolicyVersions:
    """The policy versions of one `LLMBackendPool` (the pool creates it as `pool.policy`, over
    its balancer and HTTP client)."""

    def __init__(
        self,
        balancer: Balancer,
        client: httpx.AsyncClient,
        *,
        api_key: str | None = None,
        served_name_format: str = SERVED_NAME_FORMAT,
        load_timeout_s: float = 120.0,
    ) -> None:
        self._balancer = balancer
        self._client = client
        self._api_key = api_key
        self.served_name_format = served_name_format
        self.load_timeout_s = load_timeout_s
        self._current: PolicyVersion | None = None
        self._weights: PolicyVersion | None = None  # the full weights served now (None: launch weights)
        self._versions: dict[int, PolicyVersion] = {}  # current + adapters still loaded somewhere
        self._in_use: dict[int, int] = {}  # version -> turns holding it
        self._turns = 0  # turns in flight, on any version or the base model
        self._loaded: dict[str, set[int]] = {}  # backend address -> versions loaded there
        # One publish (or probe-time load) at a time: a backend re-admitted during a publish
        # loads the version that is current once the publish is over.
        self._lock = asyncio.Lock()
        self._open = asyncio.Event()  # cleared while full weights are swapped: new turns wait
        self._open.set()
        self._idle = asyncio.Event()  # set while no turn is in flight
        self._idle.set()
        self._tasks: set[asyncio.Task[Any]] = set()

    # --- state --------------------------------------------------------------------------------

    @property
    def current(self) -> PolicyVersion | None:
        return self._current

    @property
    def version(self) -> int | None:
        return self._current.version if self._current else None

    def served_model(self, base: str) -> str:
        """The name new turns request: the current adapter's, or `base` (the launch weights or
        published full weights)."""
        return (self._current.served_name if self._current else None) or base

    def in_use(self) -> dict[int, int]:
        """Turns in flight per version (versions with none are left out)."""
        return {v: n for v, n in self._in_use.items() if n > 0}

    def loaded_on(self, address: str) -> set[int]:
        return set(self._loaded.get(address, ()))

    def status(self) -> PolicyStatus:
        return PolicyStatus(
            current=self._current,
            in_use=self.in_use(),
            loaded={a: sorted(v) for a, v in self._loaded.items()},
        )

    # --- turns --------------------------------------------------------------------------------

    async def acquire(self) -> PolicyLease:
        """A new turn takes the current version; it stays loaded until `release`. While full
        weights are being swapped, the turn waits for the new ones."""
        while not self._open.is_set():
            await self._open.wait()
        self._turns += 1
        self._idle.clear()
        current = self._current
        if current is None:
            return PolicyLease(version=None, model=None)
        self._in_use[current.version] = self._in_use.get(current.version, 0) + 1
        return PolicyLease(version=current.version, model=current.served_name)

    def release(self, lease: PolicyLease) -> None:
        """The turn is over (whatever its outcome). Idempotent."""
        if lease.released:
            return
        lease.released = True
        self._turns -= 1
        if self._turns == 0:
            self._idle.set()
        if lease.version is None:
            return
        left = self._in_use.get(lease.version, 0) - 1
        if left > 0:
            self._in_use[lease.version] = left
            return
        self._in_use.pop(lease.version, None)
        if self._current is None or lease.version != self._current.version:
            self._spawn(self._unload_unused())

    # --- publish ------------------------------------------------------------------------------

    async def publish(self, version: int, source: PolicySource) -> PublishReport:
        """Load `source` as `version` on every healthy backend, concurrently; new turns use it
        once this returns. Raises `PolicyVersionError` (not above the current version) or
        `PolicyLoadError` (no backend loaded it, or turns in flight did not end in time for
        full weights: the previous version keeps serving)."""
        async with self._lock:
            previous = self._current
            if version < 1 or (previous is not None and version <= previous.version):
                floor = previous.version if previous is not None else 0
                raise PolicyVersionError(
                    f"policy version {version} refused: versions must increase (current: {floor})"
                )
            weights = source.weights_path is not None
            candidate = PolicyVersion(
                version=version,
                served_name=None if weights else self.served_name_format.format(version=version),
                source=source,
                base_version=None if weights or self._weights is None else self._weights.version,
                published_at_unix_s=time.time(),
            )
            drained_s = 0.0
            if weights:
                self._open.clear()  # new turns wait from here until the swap is over
            try:
                if weights:
                    drained_s = await self._drain(version, previous)
                targets = [
                    e.address for e in self._balancer.stats().endpoints if e.healthy and not e.draining
                ]
                try:
                    results = await asyncio.gather(*(self._load(a, candidate) for a in targets))
                except asyncio.CancelledError:
                    self._forget(candidate, targets)  # cut short: no new turn ever asked for it
                    raise
                report = PublishReport(
                    version=version,
                    served_name=candidate.served_name,
                    previous_version=previous.version if previous else None,
                    backends=list(results),
                    drained_s=drained_s,
                )
                if weights:
                    # A failed reload may have left a backend's weights half-swapped: out, until
                    # the probe reloads the weights that are current.
                    self._eject_failed(report)
                if not report.loaded:
                    reasons = "; ".join(f"{b.backend}: {b.reason}" for b in report.backends) or (
                        "no healthy backend"
                    )
                    kept = f"version {previous.version}" if previous else "the base model"
                    raise PolicyLoadError(
                        f"policy version {version} ({source.path}) was loaded by no backend, so "
                        f"{kept} keeps serving: {reasons}",
                        report,
                    )
                self._versions[version] = candidate
                self._current = candidate
                if weights:
                    self._weights = candidate
                self._eject_failed(report)
                self._eject_unprepared(candidate)
                report.unloaded = await self._unload_unused_locked()
            finally:
                self._open.set()
        log.info(
            "policy version %d (%s) published: loaded on %d, failed on %d",
            version,
            source.path,
            len(report.loaded),
            len(report.failed),
        )
        return report

    # --- the pool's probe ---------------------------------------------------------------------

    async def ready(self, address: str) -> bool:
        """Part of the pool's health probe, for a backend that answers: is the current version
        loaded there? A backend joining, recovering or unknown to the balancer loads it now
        (over the published full weights, with the older adapters turns still hold, best
        effort); False keeps it out."""
        if self._current is None:
            return True
        state = self._balancer.state(address)
        fresh = state is None or not state.healthy  # it may have restarted and lost what it had
        if not fresh and self._current.version in self._loaded.get(address, ()):
            return True
        async with self._lock:
            current = self._current
            # Weights first: an adapter is served over them.
            needed = [self._weights] if self._weights is not None and self._weights is not current else []
            for policy in [*needed, current]:
                load = await self._load(address, policy)
                if not load.loaded:
                    state = self._balancer.state(address)
                    if state is not None:
                        state.last_error = f"policy version {policy.version} failed to load: {load.reason}"
                    log.warning("backend %s stays out: %s", address, load.reason)
                    return False
            for version in self.in_use():
                if version != current.version and not self._versions[version].is_weights:
                    await self._load(address, self._versions[version])
        return True

    async def aclose(self) -> None:
        """Stop pending unloads (the pool is closing)."""
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass

    # --- internals ----------------------------------------------------------------------------

    async def _drain(self, version: int, previous: PolicyVersion | None) -> float:
        """Wait (new turns already held back) until no turn is in flight; the seconds waited."""
        started = time.monotonic()
        try:
            await asyncio.wait_for(self._idle.wait(), self.load_timeout_s)
        except TimeoutError:
            kept = f"version {previous.version}" if previous else "the base model"
            raise PolicyLoadError(
                f"policy version {version} (full weights) was not loaded: {self._turns} turn(s) still "
                f"in flight after {self.load_timeout_s:.0f} s, so {kept} keeps serving",
                PublishReport(version=version, served_name=None, previous_version=None, backends=[]),
            ) from None
        return round(time.monotonic() - started, 3)

    def _eject_failed(self, report: PublishReport) -> None:
        for load in report.backends:
            if not load.loaded and not load.ejected:
                # Out of rotation: serving the old policy as if it were the new one would
                # be silent off-policy data. The health probe retries the load.
                self._balancer.mark_unhealthy(
                    load.backend, f"policy version {report.version} failed to load: {load.reason}"
                )
                load.ejected = True

    def _eject_unprepared(self, current: PolicyVersion) -> None:
        """A backend admitted by another path while the loads ran, without the version: out,
        until the probe loads it."""
        for endpoint in self._balancer.stats().endpoints:
            if endpoint.healthy and current.version not in self._loaded.get(endpoint.address, ()):
                self._balancer.mark_unhealthy(
                    endpoint.address, f"policy version {current.version} is not loaded here yet"
                )

    async def _load(self, address: str, policy: PolicyVersion) -> BackendLoad:
        started = time.monotonic()
        if policy.is_weights:
            error = await self._reload_weights(address, policy.source.path)
        else:
            # In place: a backend that outlived an earlier run (or a publish cut short) may hold
            # this name already, maybe with other weights; the name must mean this path now.
            body = {"lora_name": policy.served_name, "lora_path": policy.source.path, "load_inplace": True}
            error = await self._post(address, "/v1/load_lora_adapter", body, self.load_timeout_s)
            if error is not None and error.startswith("HTTP 404") and "Not Found" in error:
                error += f" ({_NO_LORA_ROUTE})"
        if error is not None:
            return BackendLoad(
                backend=address, loaded=False, reason=error, latency_s=time.monotonic() - started
            )
        loaded = self._loaded.setdefault(address, set())
        if policy.is_weights:
            loaded.difference_update(v for v in list(loaded) if self._is_weights(v))
        loaded.add(policy.version)
        return BackendLoad(backend=address, loaded=True, latency_s=time.monotonic() - started)

    def _is_weights(self, version: int) -> bool:
        known = self._versions.get(version)
        return known is not None and known.is_weights

    async def _reload_weights(self, address: str, path: str) -> str | None:
        return await reload_weights(self._client, address, path, self.load_timeout_s, api_key=self._api_key)

    def _forget(self, policy: PolicyVersion, addresses: list[str]) -> None:
        """Unload a version that never became current from every backend asked to load it
        (a load may have finished there after its answer was abandoned)."""
        for address in addresses:
            self._loaded.get(address, set()).discard(policy.version)
            if policy.served_name is not None:
                self._spawn(self._unload(address, policy.served_name))
            # Full weights cut short: the probe reloads the current ones (see `_eject_failed`).
            elif (state := self._balancer.state(address)) is not None and state.healthy:
                self._balancer.mark_unhealthy(
                    address, f"policy version {policy.version}'s reload was cut short"
                )

    async def _unload_unused(self) -> list[str]:
        async with self._lock:
            return await self._unload_unused_locked()

    async def _unload_unused_locked(self) -> list[str]:
        """Unload every adapter version that is neither current nor held by a turn, everywhere
        (full weights are replaced, not unloaded)."""
        keep = set(self.in_use())
        for kept in (self._current, self._weights):
            if kept is not None:
                keep.add(kept.version)
        stale = [v for v in self._versions if v not in keep]
        calls, names = [], []
        for version in stale:
            policy = self._versions.pop(version)
            for address, versions in self._loaded.items():
                if version in versions:
                    versions.discard(version)
                    if policy.served_name is not None:
                        calls.append(self._unload(address, policy.served_name))
            if policy.served_name is not None:
                names.append(policy.served_name)
        await asyncio.gather(*calls)
        return names

    async def _unload(self, address: str, name: str) -> None:
        error = await self._post(address, "/v1/unload_lora_adapter", {"lora_name": name}, 30.0)
        if error is not None:
            # 404: already gone (the backend restarted); otherwise it is unreachable, and a
            # backend that comes back reloads only what is current.
            log.info("unloading %s from %s: %s", name, address, error)

    async def _post(
        self, address: str, path: str, body: dict[str, Any] | None, timeout_s: float
    ) -> str | None:
        return await post_to_backend(self._client, address, path, body, timeout_s, api_key=self._api_key)

    def _spawn(self, coro: Any) -> None:
        try:
            task = asyncio.get_running_loop().create_task(coro)
        except RuntimeError:
            coro.close()
            return
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


async def post_to_backend(
    client: httpx.AsyncClient,
    address: str,
    path: str,
    body: dict[str, Any] | None,
    timeout_s: float,
    *,
    api_key: str | None = None,
) -> str | None:
    """POST to one backend; the error as text, or None on success."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else None
    try:
        response = await client.post(address + path, json=body, headers=headers, timeout=timeout_s)
    except httpx.HTTPError as exc:
        return f"{type(exc).__name__}: {exc!r}"[:500]
    if response.status_code >= 400:
        return f"HTTP {response.status_code}: {response.text[:500]}"
    return None


async def reload_weights(
    client: httpx.AsyncClient, address: str, path: str, timeout_s: float, *, api_key: str | None = None
) -> str | None:
    """Swap one backend's base weights for the checkpoint at `path`, then drop its prefix cache
    (its blocks were computed by the old weights). The error as text, or None on success."""
    body = {"method": "reload_weights", "kwargs": {"weights_path": path}, "timeout": timeout_s}
    error = await post_to_backend(client, address, "/collective_rpc", body, timeout_s, api_key=api_key)
    if error is None:
        error = await post_to_backend(client, address, "/reset_prefix_cache", None, 30.0, api_key=api_key)
    if error is not None and error.startswith("HTTP 404") and "Not Found" in error:
        error += f" ({_NO_RELOAD_ROUTE})"
    return error


async def restore_launch_weights(
    client: httpx.AsyncClient,
    address: str,
    *,
    served_name: str,
    weights_path: str,
    timeout_s: float = 120.0,
    api_key: str | None = None,
) -> None:
    """Make a backend that may have served an earlier run's policies serve `weights_path` (the
    weights it was launched with) and no adapter, as a new `PolicyVersions` assumes: a run that
    reuses a running backend would otherwise sample its first rollouts from the last run's policy.

    Refused (PolicyError) when the backend serves another model or cannot take published
    policies (no runtime LoRA routes, no in-place weight reload)."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else None
    try:
        models = await client.get(address + "/v1/models", headers=headers, timeout=30.0)
        routes = await client.get(address + "/openapi.json", headers=headers, timeout=30.0)
        if models.status_code == 401:
            given = (
                "refuses the key given"
                if api_key
                else "answers only requests with its key, and none was given"
            )
            raise PolicyError(f"backend {address} {given}")
        models.raise_for_status()
        routes.raise_for_status()
        entries = [m for m in models.json()["data"] if isinstance(m.get("id"), str)]
        paths = set(routes.json()["paths"])
    except httpx.HTTPError as exc:
        raise PolicyError(f"backend {address} does not answer: {type(exc).__name__}: {exc}") from None
    except (ValueError, KeyError, TypeError, AttributeError):  # answers, but not as vLLM does
        raise PolicyError(f"backend {address} does not answer /v1/models and /openapi.json as vLLM") from None
    if not any(m["id"] == served_name and not m.get("parent") for m in entries):
        served = sorted(m["id"] for m in entries)
        raise PolicyError(f"backend {address} serves {served}, not {served_name!r}")
    for route, missing in (("/v1/load_lora_adapter", _NO_LORA_ROUTE), ("/collective_rpc", _NO_RELOAD_ROUTE)):
        if route not in paths:
            raise PolicyError(f"backend {address}: {missing}")
    for adapter in (m["id"] for m in entries if m.get("parent") == served_name):
        error = await post_to_backend(
            client, address, "/v1/unload_lora_adapter", {"lora_name": adapter}, 30.0, api_key=api_key
        )
        if error is not None:
            raise PolicyError(f"backend {address}: cannot unload the adapter {adapter!r}: {error}")
    error = await reload_weights(client, address, weights_path, timeout_s, api_key=api_key)
    if error is not None:
        raise PolicyError(f"backend {address}: cannot restore its launch weights {weights_path}: {error}")
