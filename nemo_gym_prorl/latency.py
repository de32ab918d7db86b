# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Process-wide latency histograms: how late the event loop runs, how long sandboxes take to
open and to close, how long an agent's turn takes.

They are measured where they happen (the service's own loop, the sandbox layer) and read by
`GET /metrics` as Prometheus histograms, so a load test sees the service from inside: a
scraper takes two readings and the difference of their cumulative buckets is the distribution
of what happened in between. Fixed buckets keep each histogram a few hundred bytes however
long the process runs.
"""

from __future__ import annotations

import asyncio
import bisect
import threading
import time
from collections import deque
from dataclasses import dataclass, field

# Seconds: fine below 50 ms (the event loop's target), coarse above.
BUCKETS: tuple[float, ...] = (
    0.001, 0.002, 0.005, 0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0,
)  # fmt: skip


@dataclass
class Histogram:
    name: str
    help: str
    counts: list[int] = field(default_factory=lambda: [0] * (len(BUCKETS) + 1))  # last: +Inf
    total: float = 0.0
    max: float = 0.0
    # Sandboxes close in worker threads: one observation must not be torn by another.
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def observe(self, seconds: float) -> None:
        with self._lock:
            self.counts[bisect.bisect_left(BUCKETS, seconds)] += 1
            self.total += seconds
            self.max = max(self.max, seconds)

    @property
    def count(self) -> int:
        return sum(self.counts)

    def cumulative(self) -> list[tuple[str, float]]:
        """(upper bound, observations at or below it), as Prometheus writes buckets."""
        with self._lock:
            counts = list(self.counts)
        out, running = [], 0
        for bound, n in zip((*map(str, BUCKETS), "+Inf"), counts, strict=True):
            running += n
            out.append((bound, float(running)))
        return out


EVENT_LOOP_LAG = Histogram(
    "prorl_event_loop_lag_seconds",
    "How late the service's event loop ran a timer it had asked for: time every request, "
    "stream and rollout on the loop waited for the loop to be free.",
)
SANDBOX_OPEN = Histogram(
    "prorl_sandbox_open_seconds", "Time to open a sandbox (ready for its first command)."
)
SANDBOX_CLOSE = Histogram(
    "prorl_sandbox_close_seconds",
    "Time to close a sandbox: its processes gone, its files and cgroup removed.",
)
TURN = Histogram(
    "prorl_agent_turn_seconds",
    "One turn of the built-in agent loop: its model call (slot wait included) and its tool calls.",
)
GC_PAUSE = Histogram(
    "prorl_gc_pause_seconds",
    "One pass of Python's cyclic garbage collector in the service: every thread, the event loop's "
    "included, stops for it.",
)
WORKER_EVENT_LOOP_LAG = Histogram(
    "prorl_worker_event_loop_lag_seconds",
    "How late the event loops of the service's worker processes (`executor.kind=processes`) ran "
    "a timer they had asked for: time every rollout on a worker waited for its loop to be free.",
)
EVENT_LOOP_OWN_LAG = Histogram(
    "prorl_event_loop_own_lag_seconds",
    "The service's event-loop lag less the time its thread was ready to run but waited for a core "
    "meanwhile: how late the process's own work (callbacks, the GIL held by its other threads, "
    "garbage collection) made the loop, apart from the other programs of a busy machine.",
)
WORKER_EVENT_LOOP_OWN_LAG = Histogram(
    "prorl_worker_event_loop_own_lag_seconds",
    "The worker processes' event-loop lag less the time their loop threads waited for a core.",
)
ALL: tuple[Histogram, ...] = (EVENT_LOOP_LAG, EVENT_LOOP_OWN_LAG, SANDBOX_OPEN, SANDBOX_CLOSE, TURN, GC_PAUSE)
EXPOSED: tuple[Histogram, ...] = (
    *ALL,
    WORKER_EVENT_LOOP_LAG,
    WORKER_EVENT_LOOP_OWN_LAG,
)  # what `/metrics` shows
# A worker's loop figures are kept apart from the service's own.
_WORKER_FIGURE = {
    EVENT_LOOP_LAG.name: WORKER_EVENT_LOOP_LAG,
    EVENT_LOOP_OWN_LAG.name: WORKER_EVENT_LOOP_OWN_LAG,
}


_BY_NAME = {h.name: h for h in ALL}


def quantile(buckets: list[tuple[str, float]], q: float) -> float | None:
    """The upper bound of the bucket holding quantile `q` of cumulative `buckets` (None when
    empty; inf past the last finite bound): an upper estimate, never a low one."""
    total = buckets[-1][1] if buckets else 0.0
    if total <= 0:
        return None
    rank = q * total
    for bound, running in buckets:
        if running >= rank:
            return float(bound)
    return float("inf")


# The last few ticks of the service's loop monitor: how late the loop runs right now.
_recent_lag: deque[float] = deque(maxlen=5)


# The latest recent lag each worker process reported (worker id -> seconds).
_worker_recent_lag: dict[str, float] = {}


def note_loop_lag(seconds: float) -> None:
    EVENT_LOOP_LAG.observe(seconds)
    _recent_lag.append(seconds)


def forget_loop_lag() -> None:
    """The monitor stopped: what it saw last no longer says anything."""
    _recent_lag.clear()


def note_worker_loop_lag(worker: str, seconds: float) -> None:
    _worker_recent_lag[worker] = seconds


def forget_worker_loop_lag(worker: str) -> None:
    _worker_recent_lag.pop(worker, None)


def recent_loop_lag() -> float:
    """How late the latest of this process's loop and its workers' loops runs right now."""
    return max(max(_recent_lag, default=0.0), max(_worker_recent_lag.values(), default=0.0))


def absorb(name: str, counts: list[int], total: float, peak: float) -> None:
    """Add what a worker process's histogram `name` saw to this process's: its event-loop lags
    to the worker ones (the service's own loop keeps its figures), the rest to the histogram of
    the same name. An unknown name or shape is dropped (a newer worker's)."""
    target = _WORKER_FIGURE.get(name) or _BY_NAME.get(name)
    if target is None or len(counts) != len(target.counts):
        return
    with target._lock:
        for i, n in enumerate(counts):
            target.counts[i] += n
        target.total += total
        target.max = max(target.max, peak)


async def wait_for_calm_loop(
    threshold_s: float | None, *, poll_s: float = 0.02, at_most_s: float = 10.0
) -> None:
    """Return once the loop's recent lag is at most `threshold_s` (at once when None, or when no
    monitor runs), or after `at_most_s` whatever it is: a pace, never a stop."""
    if threshold_s is None:
        return
    give_up = time.monotonic() + at_most_s
    # Polled, not an Event: the lag changes on the monitor's ticks, and a waiter that finds it
    # high must itself let the loop run before it can look again.
    while recent_loop_lag() > threshold_s and time.monotonic() < give_up:  # noqa: ASYNC110
        await asyncio.sleep(poll_s)
