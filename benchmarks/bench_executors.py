# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The two one-node executors side by side at one load: every rollout on the service's own
event loop (`executor.kind=inprocess`, an embedded stack's default) against worker processes,
each a loop of its own (`executor.kind=processes`, `prorl serve`'s default).

Each run is one level of `prorl bench load` (its service, sandboxes, simulated backends and
measurements, unchanged) with the executor set; the arms alternate, and their order flips each
repetition, so neither always runs on a machine the other just warmed. Per run: the share of
each loop's lag samples past 50 ms (the service's loop; the worst of the workers'), the worst
loop's lag p99, the steady rollouts/s and the service failures. Per arm, the medians; then the
ratios, in-process over processes for lateness and processes over in-process for the rate.

SIMULATED: the model, as in `prorl bench load`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shlex
import statistics
import sys
from typing import Any

import bench_load

import provenance

ARMS = ("inprocess", "processes")


def run_figures(arm: str, rep: int, point: dict[str, Any]) -> dict[str, Any]:
    return {
        "arm": arm,
        "rep": rep,
        "service_loop_late_share": bench_load.late_share(point.get("event_loop_lag_buckets")),
        "worker_loops_late_share": bench_load.late_share(point.get("worker_event_loop_lag_buckets")),
        "worst_loop_lag_p99_s": bench_load._lag_p99(point),
        "worst_loop_own_lag_p99_s": bench_load._own_lag_p99(point),
        "steady_rollouts_per_s": point["steady_rollouts_per_s"],
        "service_cpu_s_per_rollout": point.get("service_cpu_s_per_rollout"),
        "service_failures": point["service_failures"],
        "outcomes": point["outcomes"],
    }


def arm_order(rep: int) -> tuple[str, ...]:
    return ARMS if rep % 2 == 0 else tuple(reversed(ARMS))


def _median(runs: list[dict[str, Any]], key: str) -> float | None:
    values = [r[key] for r in runs if r[key] is not None]
    return statistics.median(values) if values else None


def _worst_late(run: dict[str, Any]) -> float | None:
    shares = [s for s in (run["service_loop_late_share"], run["worker_loops_late_share"]) if s is not None]
    return max(shares) if shares else None


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    arms: dict[str, Any] = {}
    for arm in ARMS:
        mine = [{**r, "worst_loop_late_share": _worst_late(r)} for r in runs if r["arm"] == arm]
        arms[arm] = {
            key: _median(mine, key)
            for key in ("worst_loop_late_share", "service_loop_late_share", "worker_loops_late_share",
                        "worst_loop_lag_p99_s", "worst_loop_own_lag_p99_s", "steady_rollouts_per_s",
                        "service_cpu_s_per_rollout")
        }  # fmt: skip
        arms[arm]["service_failures"] = sum(r["service_failures"] for r in mine)
    inproc, procs = arms["inprocess"], arms["processes"]

    def ratio(a: float | None, b: float | None) -> float | None:
        return a / b if a is not None and b else None

    return {
        "arms": arms,
        "inprocess_over_processes_worst_loop_late_share": ratio(
            inproc["worst_loop_late_share"], procs["worst_loop_late_share"]
        ),
        "processes_over_inprocess_steady_rate": ratio(
            procs["steady_rollouts_per_s"], inproc["steady_rollouts_per_s"]
        ),
    }


async def benchmark(
    say: provenance.Say, level: int, reps: int, workers: int, overrides: list[str]
) -> dict[str, Any]:
    jobs = max(256, 2 * level)
    runs = []
    for rep in range(reps):
        for arm in arm_order(rep):
            say(f"rep {rep + 1}/{reps}, {arm}: {level} concurrent shell rollouts, {jobs} jobs")
            arm_overrides = [*overrides, f"executor.kind={arm}", f"executor.processes.workers={workers}"]
            point = await bench_load.run_level("shell", level, jobs, say, arm_overrides)
            say(bench_load.format_point(point))
            runs.append(run_figures(arm, rep, point))
    return {
        "level": level,
        "jobs": jobs,
        "reps": reps,
        "workers": workers,
        "runs": runs,
        **summarise(runs),
        "cpu_count": os.cpu_count(),
        "simulated": bench_load.SIMULATED,
        "service_overrides": overrides,
    }


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value:.2%}"


def format_report(r: dict[str, Any]) -> str:
    lines = [f"executors at {r['level']} concurrent shell rollouts, {r['reps']} reps, {r['cpu_count']} cores"]
    for arm, a in r["arms"].items():
        lines.append(
            f"  {arm:>10}: loop samples past 50 ms {_share(a['worst_loop_late_share'])} (worst loop; "
            f"service {_share(a['service_loop_late_share'])}, workers {_share(a['worker_loops_late_share'])}), "
            f"lag p99 {bench_load._ms(a['worst_loop_lag_p99_s'])} ms (its own "
            f"{bench_load._ms(a.get('worst_loop_own_lag_p99_s'))} ms), steady {a['steady_rollouts_per_s'] or 0:.1f} "
            f"rollouts/s, {a['service_failures']} service failures"
        )
    lines.append(f"  {summary(r)}")
    return "\n".join(lines)


def summary(r: dict[str, Any]) -> str:
    late, rate = (
        r["inprocess_over_processes_worst_loop_late_share"],
        r["processes_over_inprocess_steady_rate"],
    )
    return (
        f"worst loop late past 50 ms: in-process/processes {'-' if late is None else f'{late:.1f}x'}; "
        f"steady rate processes/in-process {'-' if rate is None else f'{rate:.2f}x'}; service failures "
        f"{r['arms']['inprocess']['service_failures']} / {r['arms']['processes']['service_failures']}"
    )


def main(as_json: bool = False, argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="prorl bench executors")
    parser.add_argument("--level", type=int, default=1024, help="concurrent shell rollouts (the RUN pool)")
    parser.add_argument("--reps", type=int, default=2, help="runs of each arm, alternated")
    parser.add_argument("--workers", type=int, default=2, help="worker processes of the processes arm")
    parser.add_argument("--serve-override", action="append", default=[], metavar="KEY=VALUE",
                        help="a `prorl serve` setting for both arms (repeatable)")  # fmt: skip
    args = parser.parse_args(argv or [])

    def say(message: str) -> None:
        print(f"[bench executors] {message}", file=sys.stderr if as_json else sys.stdout, flush=True)

    figures = asyncio.run(benchmark(say, args.level, args.reps, args.workers, args.serve_override))
    return provenance.publish(
        "executors", figures, as_json=as_json, render=format_report, summary=summary,
        simulated=bench_load.SIMULATED,
        ours="executor.kind=processes: worker processes, each an event loop",
        against="executor.kind=inprocess: every rollout on the service's loop (an embedded stack's default)",
        command=shlex.join(["prorl", "bench", "executors", "--json", "--", *argv]) if argv else None,
    )  # fmt: skip
