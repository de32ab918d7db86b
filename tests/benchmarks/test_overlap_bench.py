# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""`prorl bench overlap` alternates its arms and repeats them, and reports the median ratio with
its range. The GRPO runs themselves are scripted here (each takes minutes for real)."""

from __future__ import annotations

from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import pytest


async def test_the_arms_alternate_every_repetition_and_the_ratio_is_a_median_with_its_range(
    bench, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    overlap = bench("bench_overlap")
    order: list[str] = []
    seconds = {"real_sync": [100.0, 120.0], "real_ahead": [200.0, 400.0]}

    async def start_service(config: Any, stack: AsyncExitStack, **_: Any) -> object:
        return object()

    async def grpo_run(job: Any, *, label: str, say: Any) -> dict[str, Any]:
        order.append(label)
        arm = label.rsplit("_", 1)[0]
        trainer_s = seconds[arm].pop(0) if arm in seconds else (150.0 if arm.endswith("sync") else 100.0)
        step = {"rollout_s": 20.0, "staleness": 0}
        return {
            "trainer_s": trainer_s,
            "steps": [step],
            "ahead_hits": 0,
            "ahead_misses": 0,
            "max_staleness": 0,
        }

    monkeypatch.setattr(overlap, "start_service", start_service)
    monkeypatch.setattr(overlap, "grpo_run", grpo_run)
    monkeypatch.setattr(overlap, "grpo_job", lambda *a, **kw: kw)
    monkeypatch.setattr(overlap, "output_root", lambda: tmp_path)
    r = await overlap.benchmark(say=lambda _: None)

    assert order == [
        "real_sync_0", "real_ahead_0", "real_ahead_1", "real_sync_1",
        "simulated_sync_0", "simulated_ahead_0", "simulated_ahead_1", "simulated_sync_1",
        "simulated_sync_2", "simulated_ahead_2",
    ]  # fmt: skip
    assert r["real"]["ratios"] == [0.5, 0.3] and r["real"]["ratio_median"] == 0.4
    assert (r["real"]["ratio_min"], r["real"]["ratio_max"]) == (0.3, 0.5)
    assert r["simulated"]["ratios"] == [1.5, 1.5, 1.5]
    assert r["workload"]["simulated_step_s"] == 20.0  # the real synchronous runs' rollout time
    assert "0.40x median (0.30-0.50 over 2 repetitions) real" in overlap.summary(r)
    assert "SIMULATED" in overlap.format_report(r)
