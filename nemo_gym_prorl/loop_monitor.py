# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""How late the service's event loop runs: a timer asks to wake every `interval_s`, and the
time it wakes after that is what any request, stream or rollout on the loop would have waited.

A blocked loop (a synchronous call, a big JSON encode) shows here as lag, measured inside the
service rather than guessed from a client's latencies (`GET /metrics`:
`prorl_event_loop_lag_seconds`)."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import time

from nemo_gym_prorl.latency import (
    EVENT_LOOP_LAG,
    EVENT_LOOP_OWN_LAG,
    GC_PAUSE,
    Histogram,
    forget_loop_lag,
    note_loop_lag,
)


def freeze_startup_heap() -> int:
    """Move every object alive now out of the garbage collector's sight; returns how many.

    Called once the service is built: its modules, config and handlers live as long as the
    process, yet each full pass of the collector walked them all again (over 100,000 objects,
    tens of milliseconds with every thread stopped). Frozen objects are still freed when their
    last reference goes; only cycles among them would stay, and these never become garbage."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


class GcPauses:
    """Times every pass of the cyclic garbage collector into `histogram`: a pass stops the whole
    process, so a long one is event-loop lag whose cause the lag alone does not name."""

    def __init__(self, histogram: Histogram = GC_PAUSE) -> None:
        self.histogram = histogram
        self._started: float | None = None

    def _on_gc(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        elif self._started is not None:
            self.histogram.observe(time.perf_counter() - self._started)
            self._started = None

    def start(self) -> None:
        if self._on_gc not in gc.callbacks:
            gc.callbacks.append(self._on_gc)

    def stop(self) -> None:
        with contextlib.suppress(ValueError):
            gc.callbacks.remove(self._on_gc)


def core_wait_s() -> float | None:
    """Seconds the calling thread has been ready to run but waited for a core, since it started
    (the kernel's schedstat); None where the kernel does not keep it."""
    try:
        with open("/proc/thread-self/schedstat", "rb") as stat:
            return int(stat.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return None


class LoopMonitor:
    """Each tick, how late the loop ran (`histogram`) and how much of that the loop's own work
    made it (`own_histogram`: the lag less the time its thread waited for a core meanwhile). On a
    busy machine the two tell apart a loop its process blocks from one the host starves."""

    def __init__(
        self,
        histogram: Histogram = EVENT_LOOP_LAG,
        own_histogram: Histogram = EVENT_LOOP_OWN_LAG,
        interval_s: float = 0.02,
    ) -> None:
        self.histogram = histogram
        self.own_histogram = own_histogram
        self.interval_s = interval_s
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._watch(), name="event-loop-lag")

    async def _watch(self) -> None:
        loop = asyncio.get_running_loop()
        waited = core_wait_s()
        while True:
            due = loop.time() + self.interval_s
            await asyncio.sleep(self.interval_s)
            lag = max(0.0, loop.time() - due)
            if self.histogram is EVENT_LOOP_LAG:
                note_loop_lag(lag)  # also what INIT paces new rollouts by
            else:
                self.histogram.observe(lag)
            waited_before, waited = waited, core_wait_s()
            if waited is not None and waited_before is not None:
                self.own_histogram.observe(max(0.0, lag - (waited - waited_before)))

    async def stop(self) -> None:
        task, self._task = self._task, None
        if self.histogram is EVENT_LOOP_LAG:
            forget_loop_lag()
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
