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
- a concurrency cap per endpoint; when every usable endpoint is full the caller waits in line,
  never longer than `acquire_timeout_s`. The line is first come, first served: a freed slot is
  handed to exactly one waiter (the earliest that may use it: a trajectory waits for its own
  endpoint, a new one for any), so a finish costs one wake-up however many wait, and nobody is
  overtaken forever. A wait is reported (`slot_wait`) so that budgets leave it out: a lack of
  slots shows as backpressure, not as rollouts timing out.
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
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Collection
from dataclasses import dataclass

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
from nemo_gym_prorl.llm.slot_wait import waiting_for_slot

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


@dataclass(slots=True, eq=False)
class _Waiter:
    """One caller waiting for a slot; `seq` is its place in line."""

    seq: int
    key: str | None
    avoid: Collection[str]
    future: asyncio.Future[Lease]
    home: str | None = None  # the endpoint its key lives on (it waits for that one); None: any
    moved_from: str | None = None
    move_reason: str | None = None


def _insert(line: deque[_Waiter], waiter: _Waiter) -> None:
    """Put `waiter` in `line` by arrival (a newcomer goes last; a re-routed one to its place)."""
    if not line or line[-1].seq < waiter.seq:
        line.append(waiter)
        return
    for index, other in enumerate(line):
        if other.seq > waiter.seq:
            line.insert(index, waiter)
            return


class Balancer:
    """Least-in-flight, sticky, health-aware balancer. All methods run on one event loop."""

    def __init__(self, config: BalancerConfig | None = None, *, probe: Probe | None = None) -> None:
        self.config = config or BalancerConfig()
        self._probe = probe
        self._endpoints: dict[str, EndpointState] = {}
        self._heap: list[tuple[int, int, int, int, str]] = []
        self._seq = itertools.count(1)
        self._sticky: dict[str, str] = {}
        # Callers waiting for a slot, in arrival order: those whose key lives on an endpoint wait
        # in its line, the others in the open line. Every change of state hands free slots out
        # at once, earliest first (`_dispatch`); single-threaded asyncio makes that atomic.
        self._lines: dict[str, deque[_Waiter]] = {}
        self._open_line: deque[_Waiter] = deque()
        self._arrivals = itertools.count()
        self._idle: dict[str, list[asyncio.Future[None]]] = {}  # drains waiting for in_flight == 0
        self._closed = False
        self._health_task: asyncio.Task[None] | None = None
        self._probe_tasks: dict[str, asyncio.Task[None]] = {}
        self.sticky_hits = 0
        self.sticky_moves = 0
        self.picks = 0
        self.waited = 0  # acquisitions that had to wait for a slot
        self.wakeups = 0  # waiting callers resumed (each with its answer: one per hand-out)
        self.wait_s = 0.0  # seconds spent waiting, all callers together

    # --- membership ---------------------------------------------------------------------------

    def add(self, address: str, *, max_in_flight: int | None = None, healthy: bool = True) -> None:
        """Add an endpoint (or re-add a removed one). `healthy=False` admits it only after a
        good probe, which is how a backend that is down at start is handled."""
        state = self._endpoints.get(address)
        if state is not None and not state.removed:
            state.max_in_flight = max_in_flight or state.max_in_flight
            state.draining = False
            self._touch(state)
            self._dispatch()
            return
        state = EndpointState(address=address, max_in_flight=max_in_flight or self.config.max_in_flight)
        state.healthy = healthy
        self._endpoints[address] = state
        self._touch(state)
        self._dispatch()

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
        self._dispatch()

    def remove(self, address: str) -> None:
        """Remove at once. Requests in flight finish; keys bound here move on their next pick."""
        state = self._endpoints.pop(address, None)
        if state is None:
            return
        state.removed = True
        self._wake_drains(address)  # nothing more will come back to a removed endpoint
        self._dispatch()

    async def drain(self, address: str, *, timeout_s: float | None = None, remove: bool = True) -> bool:
        """Stop giving the endpoint to new keys, wait until nothing is in flight there, then
        remove it (`remove=True`) or leave it draining (e.g. during a weight update; `add` the
        same address to undrain). Returns False if the wait timed out (it stays draining)."""
        state = self._endpoints.get(address)
        if state is None:
            return True
        state.draining = True
        self._dispatch()
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        # Keys that live here still finish their turns here, so in_flight can rise again: re-check.
        while state.in_flight > 0 and not state.removed:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return False
            idle = asyncio.get_running_loop().create_future()
            drains = self._idle.setdefault(address, [])
            drains.append(idle)
            try:
                await asyncio.wait_for(idle, remaining)
            except TimeoutError:
                return False
            finally:
                with contextlib.suppress(ValueError):
                    drains.remove(idle)
                if not drains and self._idle.get(address) is drains:
                    del self._idle[address]
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
        for us even if its health route still answers), and stays otherwise.

        With no free slot the caller waits in line (first come, first served) for at most
        `acquire_timeout_s`; the wait is reported to the caller's budget keepers (`slot_wait`)."""
        waiter = _Waiter(
            seq=next(self._arrivals),
            key=key,
            avoid=frozenset(avoid),
            future=asyncio.get_running_loop().create_future(),
        )
        self._route(waiter)
        self._dispatch()
        if waiter.future.done():  # served at once, or refused
            return waiter.future.result()
        self.waited += 1
        started = time.monotonic()
        try:
            with waiting_for_slot():
                async with asyncio.timeout(self.config.acquire_timeout_s):
                    lease = await waiter.future
        except TimeoutError:
            self._withdraw(waiter)
            raise PoolSaturatedError(
                f"every usable backend stayed at its concurrency cap for {self.config.acquire_timeout_s:.1f}s"
            ) from None
        except BaseException:
            self._withdraw(waiter)
            raise
        finally:
            self.wait_s += time.monotonic() - started
            if waiter.future.done() and not waiter.future.cancelled():
                self.wakeups += 1
        return lease

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
            if state.in_flight == 0:
                self._wake_drains(lease.address)
            if ok:
                self.report_success(lease.address)
            else:
                self.report_failure(lease.address, error or "request failed")
        self._dispatch()

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
            self._dispatch()

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
        self._dispatch()  # every waiter is refused: the balancer is closed

    def stats(self) -> BalancerStats:
        return BalancerStats(
            endpoints=[s.info() for s in self._endpoints.values()],
            sticky_hits=self.sticky_hits,
            sticky_moves=self.sticky_moves,
            picks=self.picks,
            waiting=sum(len(line) for line in self._lines.values()) + len(self._open_line),
            waited=self.waited,
            wakeups=self.wakeups,
            wait_s=self.wait_s,
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
            self._dispatch()

    def _down_message(self) -> str:
        parts = [
            f"{s.address} ({'draining' if s.draining else s.last_error or 'unhealthy'})"
            for s in self._endpoints.values()
        ]
        return "all backends are down or draining: " + ", ".join(parts)

    # --- the line of waiters ------------------------------------------------------------------

    def _route(self, waiter: _Waiter) -> None:
        """Put `waiter` in the line it waits in: its key's endpoint's while that endpoint is
        healthy and not avoided, else the open line (the key leaves its endpoint, which the
        lease will report)."""
        bound = self._sticky.get(waiter.key) if waiter.key is not None else None
        if bound is not None:
            state = self._endpoints.get(bound)
            avoided = bound in waiter.avoid and self._has_alternative(waiter.avoid)
            if state is not None and state.healthy and not avoided:
                waiter.home = bound
                _insert(self._lines.setdefault(bound, deque()), waiter)
                return
            waiter.moved_from = bound
            if state is None:
                waiter.move_reason = "removed"
            elif not state.healthy:
                waiter.move_reason = f"unhealthy: {state.last_error}"
            else:
                waiter.move_reason = f"failed a request: {state.last_error}"
            self._unbind(waiter.key)
        waiter.home = None
        _insert(self._open_line, waiter)

    def _dispatch(self) -> None:
        """Hand out free slots, earliest waiter first, one slot to one waiter; refuse those that
        can no longer be served. Called after every change of state."""
        if self._closed:
            self._refuse_all(lambda: PoolClosedError("the balancer is closed"))
            return
        if not self._endpoints:
            self._refuse_all(
                lambda: NoBackendError("no backend is configured (add one with add_backend / --backend)")
            )
            return
        self._reroute_homeless()
        if self._open_line and not any(s.accepts_new_keys() for s in self._endpoints.values()):
            while self._open_line:
                waiter = self._open_line.popleft()
                if not waiter.future.done():
                    waiter.future.set_exception(AllBackendsDownError(self._down_message()))
        while self._serve_next():
            pass

    def _serve_next(self) -> bool:
        """Serve the earliest waiter that a free slot can take; False when none can."""
        home: _Waiter | None = None
        for address, line in list(self._lines.items()):
            while line and line[0].future.done():  # gave up (timeout, cancel) and left
                line.popleft()
            if not line:
                del self._lines[address]
                continue
            if self._endpoints[address].has_slot() and (home is None or line[0].seq < home.seq):
                home = line[0]
        while self._open_line and self._open_line[0].future.done():
            self._open_line.popleft()
        first = self._open_line[0] if self._open_line else None
        if first is not None and (home is None or first.seq < home.seq):
            if first.key is not None and first.key in self._sticky:
                # A request of the same trajectory was served meanwhile: follow it there.
                self._route(self._open_line.popleft())
                return True
            state = self._pop_least_loaded(first.avoid)
            if state is not None:
                self._open_line.popleft()
                if first.key is not None:
                    self._bind(first.key, state)
                    if first.moved_from is not None:
                        self.sticky_moves += 1
                self._hand(first, state)
                return True
        if home is None:
            return False
        assert home.home is not None
        self._lines[home.home].popleft()
        if home.moved_from is None:
            self.sticky_hits += 1
        self._hand(home, self._endpoints[home.home])
        return True

    def _hand(self, waiter: _Waiter, state: EndpointState) -> None:
        waiter.future.set_result(self._take(state, waiter.key, waiter.moved_from, waiter.move_reason))

    def _reroute_homeless(self) -> None:
        """Waiters whose endpoint was removed or ejected move to the open line, in their place."""
        for address in [a for a in self._lines if not self._keeps_its_keys(a)]:
            for waiter in self._lines.pop(address):
                if not waiter.future.done():
                    self._route(waiter)

    def _keeps_its_keys(self, address: str) -> bool:
        state = self._endpoints.get(address)
        return state is not None and state.healthy  # a draining one still finishes its keys' turns

    def _refuse_all(self, error: Callable[[], Exception]) -> None:
        lines = [*self._lines.values(), self._open_line]
        self._lines = {}
        self._open_line = deque()
        for line in lines:
            for waiter in line:
                if not waiter.future.done():
                    waiter.future.set_exception(error())

    def _withdraw(self, waiter: _Waiter) -> None:
        """A waiter gave up (timeout, cancel). A slot handed to it just before goes to the next."""
        future = waiter.future
        if future.done() and not future.cancelled() and future.exception() is None:
            lease = future.result()
            lease.released = True
            state = self._endpoints.get(lease.address)
            if state is not None:
                state.in_flight -= 1
                self._touch(state)
                if state.in_flight == 0:
                    self._wake_drains(lease.address)
            self._dispatch()
            return
        future.cancel()
        line = self._open_line if waiter.home is None else self._lines.get(waiter.home)
        if line is not None:
            with contextlib.suppress(ValueError):
                line.remove(waiter)

    def _wake_drains(self, address: str) -> None:
        for idle in self._idle.pop(address, []):
            if not idle.done():
                idle.set_result(None)

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
