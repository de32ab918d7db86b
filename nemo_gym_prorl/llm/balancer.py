# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""A generic, protocol-agnostic balancer over replicated endpoints.

It knows nothing about HTTP or LLMs: an endpoint is an address string, work is a lease, and
health is whatever an injected async `probe(address)` says: True (up), False (down) or None (no
answer in time: inconclusive, since a busy server can answer late). The LLM pool
(`pool.py`) puts HTTP and retries on top; replicated resources servers can reuse it as is.

Policy (why each part exists):
- least requests in flight, via a min-heap keyed (in_flight, bound, assigned_total): ProRL's
  heap counts assignments that never go down, so a slow backend keeps receiving its "fair"
  share and becomes the straggler; in-flight load reflects actual speed.
- ties by fewest trajectories currently bound, then by fewest ever assigned, so an idle pool
  spreads new trajectories evenly.
- sticky per key (trajectory id) while the endpoint is healthy: every turn reuses the
  backend's prefix cache. A move (endpoint ejected/removed) is reported on the lease so the
  trajectory can record it.
- a concurrency cap per endpoint; when every usable endpoint is full the caller waits, but
  never longer than `acquire_timeout_s`.
- health: failures reported by callers trigger an immediate probe (and enough consecutive
  failures eject outright); a periodic probe re-admits ejected endpoints. A probe left
  unanswered ejects only when enough in a row are: one slow answer from a loaded server must
  not take the only backend out of service.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Collection

from nemo_gym_prorl.llm.endpoints import (
    BalancerConfig,
    BalancerStats,
    EndpointInfo,
    EndpointState,
    Lease,
)
from nemo_gym_prorl.llm.errors import (
    AllBackendsDownError,
    NoBackendError,
    PoolClosedError,
    PoolSaturatedError,
)

log = logging.getLogger(__name__)

Probe = Callable[[str], Awaitable[bool | None]]

__all__ = [
    "Balancer",
    "BalancerConfig",
    "BalancerStats",
    "EndpointInfo",
    "EndpointState",
    "Lease",
    "Probe",
]


class Balancer:
    """Least-in-flight, sticky, health-aware balancer. All methods run on one event loop."""

    def __init__(self, config: BalancerConfig | None = None, *, probe: Probe | None = None) -> None:
        self.config = config or BalancerConfig()
        self._probe = probe
        self._endpoints: dict[str, EndpointState] = {}
        self._heap: list[tuple[int, int, int, int, str]] = []
        self._seq = itertools.count(1)
        self._sticky: dict[str, str] = {}
        # Waiters sleep on the current "changed" event; every state change sets it and installs
        # a fresh one. Single-threaded asyncio makes check-then-take atomic, so no lock is needed.
        self._changed = asyncio.Event()
        self._closed = False
        self._health_task: asyncio.Task[None] | None = None
        self._probe_tasks: dict[str, asyncio.Task[None]] = {}
        self.sticky_hits = 0
        self.sticky_moves = 0
        self.picks = 0

    # --- membership ---------------------------------------------------------------------------

    def add(self, address: str, *, max_in_flight: int | None = None, healthy: bool = True) -> None:
        """Add an endpoint (or re-add a removed one). `healthy=False` admits it only after a
        good probe, which is how a backend that is down at start is handled."""
        state = self._endpoints.get(address)
        if state is not None and not state.removed:
            state.max_in_flight = max_in_flight or state.max_in_flight
            state.draining = False
            self._touch(state)
            self._notify()
            return
        state = EndpointState(address=address, max_in_flight=max_in_flight or self.config.max_in_flight)
        state.healthy = healthy
        self._endpoints[address] = state
        self._touch(state)
        self._notify()

    def set_cap(self, address: str, max_in_flight: int) -> None:
        """Change an endpoint's concurrency cap, nothing else (a draining one stays draining).
        Leases beyond a lowered cap finish; no new ones start until it has room again."""
        if max_in_flight < 1:
            raise ValueError("max_in_flight must be at least 1")
        state = self._endpoints.get(address)
        if state is None:
            return
        state.max_in_flight = max_in_flight
        self._touch(state)
        self._notify()

    def remove(self, address: str) -> None:
        """Remove at once. Requests in flight finish; keys bound here move on their next pick."""
        state = self._endpoints.pop(address, None)
        if state is None:
            return
        state.removed = True
        self._notify()

    async def drain(self, address: str, *, timeout_s: float | None = None, remove: bool = True) -> bool:
        """Stop giving the endpoint to new keys, wait until nothing is in flight there, then
        remove it (`remove=True`) or leave it draining (e.g. during a weight update; `add` the
        same address to undrain). Returns False if the wait timed out (it stays draining)."""
        state = self._endpoints.get(address)
        if state is None:
            return True
        state.draining = True
        self._notify()
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while state.in_flight > 0:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return False
            await self._wait_for_change(remaining)
        if remove:
            self.remove(address)
        return True

    def addresses(self) -> list[str]:
        return list(self._endpoints)

    def state(self, address: str) -> EndpointState | None:
        return self._endpoints.get(address)

    # --- leases -------------------------------------------------------------------------------

    async def acquire(self, key: str | None = None, *, avoid: Collection[str] = ()) -> Lease:
        """Pick an endpoint for one request of `key` (a trajectory id; None = not sticky).

        `avoid` names endpoints that just failed this key's request: the key leaves them if
        any other usable endpoint exists (a backend that fails our request is not healthy
        for us even if its health route still answers), and stays otherwise."""
        deadline = time.monotonic() + self.config.acquire_timeout_s
        moved_from: str | None = None
        move_reason: str | None = None
        while True:
            if self._closed:
                raise PoolClosedError("the balancer is closed")
            if not self._endpoints:
                raise NoBackendError("no backend is configured (add one with add_backend / --backend)")
            bound_addr = self._sticky.get(key) if key is not None else None
            if bound_addr is not None:
                state = self._endpoints.get(bound_addr)
                avoided = bound_addr in avoid and self._has_alternative(avoid)
                if state is not None and state.healthy and not avoided:
                    if state.has_slot():
                        if moved_from is None:
                            self.sticky_hits += 1
                        return self._take(state, key, moved_from, move_reason)
                else:
                    # The endpoint this key lived on is gone, ejected or failing: move the key.
                    moved_from = bound_addr
                    if state is None:
                        move_reason = "removed"
                    elif not state.healthy:
                        move_reason = f"unhealthy: {state.last_error}"
                    else:
                        move_reason = f"failed a request: {state.last_error}"
                    self._unbind(key)
                    bound_addr = None
            if bound_addr is None:
                usable = [s for s in self._endpoints.values() if s.accepts_new_keys()]
                if not usable:
                    raise AllBackendsDownError(self._down_message())
                state = self._pop_least_loaded(avoid)
                if state is not None:
                    if key is not None:
                        self._bind(key, state)
                        if moved_from is not None:
                            self.sticky_moves += 1
                    return self._take(state, key, moved_from, move_reason)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise PoolSaturatedError(
                    f"every usable backend stayed at its concurrency cap for "
                    f"{self.config.acquire_timeout_s:.1f}s"
                )
            await self._wait_for_change(remaining)

    def release(self, lease: Lease, *, ok: bool = True, error: str | None = None) -> None:
        """Return the slot. `ok=False` counts a failure against the endpoint (see `report_failure`)."""
        if lease.released:
            return
        lease.released = True
        state = self._endpoints.get(lease.address)
        if state is not None:
            state.in_flight -= 1
            state.served += 1
            self._touch(state)
            if ok:
                self.report_success(lease.address)
            else:
                self.report_failure(lease.address, error or "request failed")
        self._notify()

    @contextlib.asynccontextmanager
    async def lease(self, key: str | None = None) -> AsyncIterator[Lease]:
        """`async with balancer.lease(key) as lease:`; an exception inside counts as a failure."""
        lease = await self.acquire(key)
        try:
            yield lease
        except BaseException as exc:
            self.release(lease, ok=False, error=repr(exc))
            raise
        else:
            self.release(lease, ok=True)

    def forget(self, key: str) -> None:
        """The trajectory is over: drop its sticky binding so `bound` counts stay meaningful."""
        self._unbind(key)

    def bound_endpoint(self, key: str) -> str | None:
        return self._sticky.get(key)

    # --- health -------------------------------------------------------------------------------

    def report_success(self, address: str) -> None:
        state = self._endpoints.get(address)
        if state is not None:
            state.consecutive_failures = 0

    def report_failure(self, address: str, error: str, *, fatal: bool = False) -> None:
        """Count a failure. `fatal` (connection refused: the process is gone) ejects at once;
        otherwise enough consecutive failures eject, and each one triggers a probe."""
        state = self._endpoints.get(address)
        if state is None:
            return
        state.consecutive_failures += 1
        state.last_error = error
        if fatal or state.consecutive_failures >= self.config.eject_after_failures:
            self._eject(state, error)
        self._probe_soon(address)

    def mark_unhealthy(self, address: str, error: str) -> None:
        state = self._endpoints.get(address)
        if state is not None:
            self._eject(state, error)

    def mark_healthy(self, address: str) -> None:
        state = self._endpoints.get(address)
        if state is not None and not state.healthy:
            state.healthy = True
            state.consecutive_failures = 0
            state.last_error = None
            log.info("endpoint %s re-admitted", address)
            self._touch(state)
            self._notify()

    async def probe_all(self) -> None:
        """Probe every endpoint once, concurrently (the periodic check calls this)."""
        await asyncio.gather(*(self._probe_one(a) for a in list(self._endpoints)))

    def start(self) -> None:
        """Start the periodic health check (no-op without a probe)."""
        if self._probe is not None and self._health_task is None:
            self._health_task = asyncio.get_running_loop().create_task(self._health_loop())

    async def close(self) -> None:
        self._closed = True
        tasks = [t for t in [self._health_task, *self._probe_tasks.values()] if t is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._health_task = None
        self._probe_tasks.clear()
        self._notify()

    def stats(self) -> BalancerStats:
        return BalancerStats(
            endpoints=[s.info() for s in self._endpoints.values()],
            sticky_hits=self.sticky_hits,
            sticky_moves=self.sticky_moves,
            picks=self.picks,
        )

    # --- internals ----------------------------------------------------------------------------

    def _take(
        self, state: EndpointState, key: str | None, moved_from: str | None, reason: str | None
    ) -> Lease:
        state.in_flight += 1
        self.picks += 1
        self._touch(state)
        return Lease(address=state.address, key=key, moved_from=moved_from, move_reason=reason)

    def _bind(self, key: str, state: EndpointState) -> None:
        self._sticky[key] = state.address
        state.bound += 1
        state.assigned_total += 1
        self._touch(state)

    def _unbind(self, key: str | None) -> None:
        if key is None:
            return
        address = self._sticky.pop(key, None)
        state = self._endpoints.get(address) if address is not None else None
        if state is not None:
            state.bound -= 1
            self._touch(state)

    def _touch(self, state: EndpointState) -> None:
        """Push the endpoint's current key; older entries for it become stale."""
        state.version = next(self._seq)  # globally unique, so a re-added address never matches old entries
        heapq.heappush(self._heap, (*state.heap_key(), state.version, state.address))
        if len(self._heap) > 4 * len(self._endpoints) + 64:
            self._rebuild_heap()

    def _rebuild_heap(self) -> None:
        self._heap = [(*s.heap_key(), s.version, s.address) for s in self._endpoints.values()]
        heapq.heapify(self._heap)

    def _pop_least_loaded(self, avoid: Collection[str] = ()) -> EndpointState | None:
        """The usable endpoint with the fewest requests in flight (ties: fewest bound keys,
        then fewest ever assigned), or None if every usable one is at its cap. Endpoints in
        `avoid` are taken only when no other one qualifies."""
        skipped: list[tuple[int, int, int, int, str]] = []
        chosen: EndpointState | None = None
        fallback: EndpointState | None = None
        while self._heap:
            entry = heapq.heappop(self._heap)
            state = self._endpoints.get(entry[4])
            if state is None or state.version != entry[3]:
                continue  # stale: a newer entry for this endpoint exists (or it was removed)
            skipped.append(entry)  # still current: it must go back whatever happens
            if state.accepts_new_keys() and state.has_slot():
                if state.address not in avoid:
                    chosen = state
                    break
                fallback = fallback or state
        for entry in skipped:
            heapq.heappush(self._heap, entry)
        return chosen or fallback

    def _has_alternative(self, avoid: Collection[str]) -> bool:
        return any(s.accepts_new_keys() and s.address not in avoid for s in self._endpoints.values())

    def _eject(self, state: EndpointState, error: str) -> None:
        state.last_error = error
        state.consecutive_ok_probes = 0
        if state.healthy:
            state.healthy = False
            log.warning("endpoint %s ejected: %s", state.address, error)
            self._touch(state)
            self._notify()

    def _down_message(self) -> str:
        parts = [
            f"{s.address} ({'draining' if s.draining else s.last_error or 'unhealthy'})"
            for s in self._endpoints.values()
        ]
        return "all backends are down or draining: " + ", ".join(parts)

    def _notify(self) -> None:
        """Wake every waiter; they re-check the state themselves."""
        self._changed.set()
        self._changed = asyncio.Event()

    async def _wait_for_change(self, timeout_s: float | None) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._changed.wait(), timeout_s)

    def _probe_soon(self, address: str) -> None:
        if self._probe is None or self._closed:
            return
        task = self._probe_tasks.get(address)
        if task is not None and not task.done():
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._probe_tasks[address] = loop.create_task(self._probe_one(address))

    async def _probe_one(self, address: str) -> None:
        if self._probe is None:
            return
        try:
            ok = await self._probe(address)
            error = "health probe failed"
        except Exception as exc:  # a probe must never take the balancer down
            ok, error = False, f"health probe raised {exc!r}"
        state = self._endpoints.get(address)
        if state is None:
            return
        if ok is None:
            state.consecutive_ok_probes = 0
            state.consecutive_probe_timeouts += 1
            if state.consecutive_probe_timeouts >= self.config.eject_after_probe_timeouts:
                timeouts = state.consecutive_probe_timeouts
                self._eject(
                    state, state.last_error or f"{timeouts} health probes in a row got no answer in time"
                )
            return
        state.consecutive_probe_timeouts = 0
        if ok:
            state.consecutive_ok_probes += 1
            if not state.healthy and state.consecutive_ok_probes >= self.config.readmit_after_successes:
                self.mark_healthy(address)
        else:
            # Keep the request error that led here (more useful than "probe failed").
            self._eject(state, state.last_error or error)

    async def _health_loop(self) -> None:
        while not self._closed:
            await asyncio.sleep(self.config.health_interval_s)
            try:
                await self.probe_all()
            except Exception:  # keep the loop alive whatever one round does
                log.exception("health check round failed")
