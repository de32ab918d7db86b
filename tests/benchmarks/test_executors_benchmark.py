# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""`prorl bench executors`: arms alternated with their order flipped each repetition, the same
load for both, lateness read from the loop-lag histograms, and ratios that say when an arm has
nothing to compare. No service runs here: each level is a stand-in point."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest


def _buckets(late: int, total: int) -> list[tuple[str, float]]:
    return [
        ("0.01", total - late - 1),
        ("0.05", float(total - late)),
        ("0.1", float(total)),
        ("+Inf", float(total)),
    ]


def _point(arm: str) -> dict[str, Any]:
    workers = arm == "processes"
    return {
        "event_loop_lag_buckets": _buckets(1, 1000) if workers else _buckets(80, 1000),
        "worker_event_loop_lag_buckets": _buckets(15, 1000) if workers else None,
        "loop_lag_p99_s": 0.075 if workers else 0.2,
        "steady_rollouts_per_s": 40.0 if workers else 44.0,
        "service_cpu_s_per_rollout": 0.025,
        "service_failures": 0,
        "outcomes": {"ok": 2048},
    }


def test_the_arms_alternate_with_the_same_load_and_the_ratios_compare_the_worst_loops(
    bench: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    executors, load = bench("bench_executors"), bench("bench_load")
    calls: list[tuple[str, int, int, list[str]]] = []

    async def level(series: str, level: int, jobs: int, say: Any, overrides: list[str]) -> dict[str, Any]:
        calls.append((series, level, jobs, overrides))
        return _point(next(o for o in overrides if o.startswith("executor.kind=")).split("=")[1])

    monkeypatch.setattr(load, "run_level", level)
    monkeypatch.setattr(load, "format_point", lambda point: "")
    r = asyncio.run(executors.benchmark(lambda message: None, 512, 2, 3, ["x=1"]))
    assert [c[3][1] for c in calls] == [
        "executor.kind=inprocess", "executor.kind=processes", "executor.kind=processes", "executor.kind=inprocess"
    ]  # fmt: skip
    assert {(c[0], c[1], c[2], c[3][0], c[3][2]) for c in calls} == {
        ("shell", 512, 1024, "x=1", "executor.processes.workers=3")
    }
    assert r["arms"]["inprocess"]["worst_loop_late_share"] == pytest.approx(0.08)
    assert r["arms"]["processes"]["worst_loop_late_share"] == pytest.approx(
        0.015
    )  # the workers', not the service's
    assert r["inprocess_over_processes_worst_loop_late_share"] == pytest.approx(0.08 / 0.015)
    assert r["processes_over_inprocess_steady_rate"] == pytest.approx(40 / 44)
    assert "in-process/processes 5.3x" in executors.summary(r)


def test_a_loop_without_samples_has_no_lateness_and_a_ratio_over_nothing_is_none(bench: Any) -> None:
    executors, load = bench("bench_executors"), bench("bench_load")
    assert load.late_share(None) is None
    assert load.late_share([("0.05", 0.0), ("+Inf", 0.0)]) is None
    run = executors.run_figures("processes", 0, {**_point("processes"), "worker_event_loop_lag_buckets": None,
                                                  "event_loop_lag_buckets": None})  # fmt: skip
    summary = executors.summarise([run, executors.run_figures("inprocess", 0, _point("inprocess"))])
    assert summary["arms"]["processes"]["worst_loop_late_share"] is None
    assert summary["inprocess_over_processes_worst_loop_late_share"] is None


def test_a_recording_names_the_options_it_ran_with(bench: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    executors, provenance = bench("bench_executors"), bench("provenance")
    runs = [executors.run_figures(arm, 0, _point(arm)) for arm in executors.ARMS]
    figures = {"level": 1024, "reps": 3, "cpu_count": 2, "runs": runs, **executors.summarise(runs)}

    async def canned(*args: Any) -> dict[str, Any]:
        return figures

    recorded: dict[str, Any] = {}
    monkeypatch.setattr(executors, "benchmark", canned)
    monkeypatch.setattr(provenance, "record", lambda name, figures, **kw: recorded.update(name=name, **kw))
    assert executors.main(as_json=True, argv=["--reps", "3"]) == 0
    assert recorded["name"] == "executors"
    assert recorded["command"] == "prorl bench executors --json -- --reps 3"
    assert (
        provenance.recording_command({"command": recorded["command"]})
        == "prorl bench --json executors -- --reps 3"
    )
