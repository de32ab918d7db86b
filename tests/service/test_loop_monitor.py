# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The service measures its own event loop: a blocked loop shows as lag, in /metrics too."""

from __future__ import annotations

import asyncio
import gc
import time

from prometheus_client.parser import text_string_to_metric_families
from service_helpers import Api

from nemo_gym_prorl.latency import Histogram
from nemo_gym_prorl.loop_monitor import GcPauses, LoopMonitor, freeze_startup_heap


async def test_a_loop_blocked_for_a_while_is_measured_as_that_much_lag() -> None:
    histogram = Histogram("lag", "")
    monitor = LoopMonitor(histogram, interval_s=0.01)
    monitor.start()
    await asyncio.sleep(0.05)
    time.sleep(0.3)  # a synchronous call on the loop: everything else waits
    await asyncio.sleep(0.05)
    await monitor.stop()
    assert histogram.max >= 0.25
    assert histogram.count >= 3


def test_every_pass_of_the_garbage_collector_is_timed_until_stopped() -> None:
    histogram = Histogram("gc", "")
    pauses = GcPauses(histogram)
    pauses.start()
    pauses.start()  # once only
    cycles = [[] for _ in range(20000)]
    for cycle in cycles:
        cycle.append(cycle)
    del cycles
    gc.collect()
    counted = histogram.count  # the full pass, and any the allocations above set off
    assert counted >= 1 and histogram.max > 0
    pauses.stop()
    gc.collect()
    assert histogram.count == counted


def test_what_the_service_built_at_start_is_frozen_out_of_the_collectors_passes() -> None:
    startup = [[i] for i in range(50000)]  # long-lived containers, as a service's modules hold
    try:
        assert freeze_startup_heap() >= len(startup)
        assert not any(gc.is_tracked(o) and o in gc.get_objects(0) for o in startup[:3])
        freed = [[]]
        freed[0].append(freed)  # a cycle made after the freeze is still collected
        del freed
        assert gc.collect() >= 1
    finally:
        gc.unfreeze()


async def test_metrics_serve_the_lag_and_sandbox_histograms(api: Api) -> None:
    await asyncio.sleep(0.1)  # the running service's monitor ticks meanwhile
    text = (await api.http.get("/metrics")).text
    families = {f.name: f for f in text_string_to_metric_families(text)}
    for name in (
        "prorl_event_loop_lag_seconds",
        "prorl_sandbox_open_seconds",
        "prorl_sandbox_close_seconds",
        "prorl_gc_pause_seconds",
    ):
        assert families[name].type == "histogram"
        assert f"{name}_max" in families
    lag_count = next(s for s in families["prorl_event_loop_lag_seconds"].samples if s.name.endswith("_count"))
    assert lag_count.value > 0, "the service watches its own loop while it runs"
