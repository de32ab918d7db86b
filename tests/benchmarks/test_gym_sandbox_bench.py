# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The Gym sandbox-provider benchmark runs both arms at a tiny size and reports every figure
(shape and sanity only: timings on a shared machine mean nothing in a test)."""

from __future__ import annotations

import math

import pytest


@pytest.mark.bwrap
async def test_gym_sandbox_benchmark_measures_both_arms(bench) -> None:
    gym_sandbox = bench("bench_gym_sandbox")
    r = await gym_sandbox.measure(rounds=2, cycles=2)
    for name in ("bubblewrap", "local"):
        assert len(r[f"{name}_round_p50_ms"]) == 2
        assert 0 < r[f"{name}_p50_ms"] <= r[f"{name}_p90_ms"] and math.isfinite(r[f"{name}_p90_ms"])
    assert r["bubblewrap_vs_local"] > 0 and r["simulated"] == []
    assert set(r["not_measured"]) <= {"docker", "apptainer", "enroot"}
    assert "local" in gym_sandbox.render(r) and "Gym's unisolated local" in gym_sandbox.summary(r)
