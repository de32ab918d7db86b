# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The latency histograms: fixed buckets, cumulative as Prometheus writes them, and quantiles
read back as upper bounds (never an estimate below what happened)."""

from __future__ import annotations

import math

from nemo_gym_prorl.latency import BUCKETS, Histogram, quantile


def test_observations_land_in_the_first_bucket_that_holds_them() -> None:
    h = Histogram("h", "help")
    for seconds in (0.0005, 0.001, 0.004, 0.04, 100.0):
        h.observe(seconds)
    cumulative = dict(h.cumulative())
    assert cumulative["0.001"] == 2 and cumulative["0.005"] == 3 and cumulative["0.05"] == 4
    assert cumulative["+Inf"] == 5 == h.count
    assert h.max == 100.0 and math.isclose(h.total, 100.0455)
    assert len(h.cumulative()) == len(BUCKETS) + 1


def test_a_quantile_is_the_upper_bound_of_the_bucket_that_holds_it() -> None:
    h = Histogram("h", "help")
    for _ in range(98):
        h.observe(0.003)
    h.observe(0.04)
    h.observe(0.3)
    assert quantile(h.cumulative(), 0.5) == 0.005
    assert quantile(h.cumulative(), 0.99) == 0.05
    assert quantile(h.cumulative(), 1.0) == 0.5
    assert quantile(Histogram("empty", "").cumulative(), 0.99) is None
    h.observe(1e6)
    assert quantile(h.cumulative(), 1.0) == math.inf


def test_a_workers_histograms_add_to_the_services_and_its_loop_lag_stays_apart() -> None:
    from nemo_gym_prorl import latency

    sandbox_before = latency.SANDBOX_OPEN.count
    loop_before, worker_before = latency.EVENT_LOOP_LAG.count, latency.WORKER_EVENT_LOOP_LAG.count
    own_before, worker_own_before = latency.EVENT_LOOP_OWN_LAG.count, latency.WORKER_EVENT_LOOP_OWN_LAG.count
    counts = [0] * (len(BUCKETS) + 1)
    counts[3] = 2
    latency.absorb(latency.SANDBOX_OPEN.name, counts, 0.02, 0.01)
    latency.absorb(latency.EVENT_LOOP_LAG.name, counts, 0.02, 0.01)
    latency.absorb(latency.EVENT_LOOP_OWN_LAG.name, counts, 0.02, 0.01)
    latency.absorb("prorl_not_a_histogram_here", counts, 0.02, 0.01)  # a newer worker's: dropped
    latency.absorb(latency.TURN.name, counts[:-1], 0.02, 0.01)  # another bucket layout: dropped
    assert latency.SANDBOX_OPEN.count == sandbox_before + 2
    assert latency.WORKER_EVENT_LOOP_LAG.count == worker_before + 2
    assert latency.WORKER_EVENT_LOOP_OWN_LAG.count == worker_own_before + 2
    assert latency.EVENT_LOOP_LAG.count == loop_before  # the service's own loop keeps its figures
    assert latency.EVENT_LOOP_OWN_LAG.count == own_before


def test_init_paces_by_the_latest_loop_the_service_or_a_worker() -> None:
    from nemo_gym_prorl import latency

    latency.note_worker_loop_lag("worker-0.0", 0.4)
    try:
        assert latency.recent_loop_lag() >= 0.4
    finally:
        latency.forget_worker_loop_lag("worker-0.0")
    assert latency.recent_loop_lag() == max(latency._recent_lag, default=0.0)  # the worker's is gone
