# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The service measures its own event loop: a blocked loop shows as lag, in /metrics too."""

from __future__ import annotations

import asyncio
import gc
import json
import subprocess
import sys
import time

import pytest
from prometheus_client.parser import text_string_to_metric_families
from service_helpers import Api

from nemo_gym_prorl.latency import Histogram
from nemo_gym_prorl.loop_monitor import GcPauses, LoopMonitor, core_wait_s, freeze_startup_heap


async def test_a_loop_blocked_for_a_while_is_measured_as_that_much_lag_of_its_own() -> None:
    histogram, own = Histogram("lag", ""), Histogram("own", "")
    monitor = LoopMonitor(histogram, own, interval_s=0.01)
    monitor.start()
    await asyncio.sleep(0.05)
    time.sleep(0.3)  # a synchronous call on the loop: everything else waits
    await asyncio.sleep(0.05)
    await monitor.stop()
    assert histogram.max >= 0.25
    assert histogram.count >= 3
    if core_wait_s() is not None:  # the loop's own doing, not the host's
        assert own.max >= 0.25
        assert own.count == histogram.count


STARVED_LOOP = """
import asyncio, json, os, subprocess, sys, time
from nemo_gym_prorl.latency import Histogram
from nemo_gym_prorl.loop_monitor import LoopMonitor

os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
# A busy program of the machine on the same core, at the default priority; this loop runs only
# when it leaves the core free (SCHED_IDLE, allowed unprivileged).
spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))

async def main():
    lag, own = Histogram("lag", ""), Histogram("own", "")
    monitor = LoopMonitor(lag, own, interval_s=0.01)
    monitor.start()
    await asyncio.sleep(2.0)
    await monitor.stop()
    return lag, own

try:
    lag, own = asyncio.run(main())
finally:
    spinner.kill()
    spinner.wait()
print(json.dumps({"lag": lag.total, "own": own.total, "ticks": lag.count}))
"""


def test_a_loop_the_machine_starves_of_cores_is_late_but_not_of_its_own_doing() -> None:
    if core_wait_s() is None:
        pytest.skip("this kernel keeps no schedstat: a loop's wait for a core cannot be told apart")
    done = subprocess.run([sys.executable, "-c", STARVED_LOOP], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    seconds = json.loads(done.stdout)
    assert seconds["lag"] > 0.5, seconds  # starved: late, in all, for a good part of its 2 s
    assert seconds["own"] < seconds["lag"] / 5, seconds


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
        "prorl_event_loop_own_lag_seconds",
        "prorl_sandbox_open_seconds",
        "prorl_sandbox_close_seconds",
        "prorl_gc_pause_seconds",
    ):
        assert families[name].type == "histogram"
        assert f"{name}_max" in families
    lag_count = next(s for s in families["prorl_event_loop_lag_seconds"].samples if s.name.endswith("_count"))
    assert lag_count.value > 0, "the service watches its own loop while it runs"
