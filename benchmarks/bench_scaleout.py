# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Scale-out on Ray: rollout throughput with 1, 2, 4 and 8 nodes, and a run that loses nodes.

The cluster is a real `ray.cluster_utils.Cluster` on this machine: a real raylet per simulated
node (`num_cpus=1` declared each), one real rollout actor per node (the Ray executor of
`prorl serve executor.kind=ray`), the real pipeline and its queues. What is SIMULATED is the
work: the scripted handler sleeps for the model and tool latency (INIT, RUN turns, EVAL), so
the two cores of this machine are not the ceiling and the figures measure placement,
dispatch and Ray's overhead, which is what scaling out adds.

- Throughput X(N): jobs per second after warm-up (the first wave of N x slots jobs is left
  out), with N nodes and N x `SLOTS` workers per stage. Efficiency E(N) = X(N) / (N * X(1)).
- Baseline: the in-process executor with the same pools (N x SLOTS workers per stage) over the
  same simulated handler: Ray's own overhead is X_ray(N) / X_inprocess(N).
- CPU: this process and every process under it (raylets, actors), as a share of all cores;
  a point above 70% is flagged CPU-bound (the machine, not the design, would be the limit).
- Node loss: 4 nodes; one removed gracefully and one by killing its raylet while jobs run;
  every submitted job must complete (jobs there are re-run elsewhere with fresh state).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import sys
import time
from typing import Any

import psutil

import provenance  # first: it notes the load average the run starts under
from nemo_gym_prorl.pipeline import HandlerRegistry, JobResult, JobSpec, JobState, Pipeline, PipelineConfig
from nemo_gym_prorl.pipeline.executor import InProcessExecutor, StageExecutor
from nemo_gym_prorl.pipeline.ray_executor import RayExecutor, RayExecutorConfig
from nemo_gym_prorl.service.config import validate_config
from nemo_gym_prorl.service.stack import build_node, serve_handlers
from ray_local import (
    add_local_node,
    children_write_to_stderr,
    connect,
    shutdown_local_cluster,
    start_local_cluster,
)
from scripted_handlers import ScriptedHandler, subprocess_env

NODE_COUNTS = (1, 2, 4, 8)
SLOTS = 4  # jobs with live state per node
WAVES = 4  # jobs per point = WAVES x N x SLOTS; the first wave is warm-up
# Simulated stage latencies (seconds): sandbox start, 4 model+tool turns, tests.
SCRIPT = {"init_s": 0.3, "run_s": 2.4, "eval_s": 0.3, "turns": 4}
CPU_BOUND = 0.70
SIMULATED = [
    "rollout work: INIT, RUN turns and EVAL are scripted sleeps standing for model and tool latency",
    "nodes: real raylets, all on this one machine (no network between them)",
]
KILL_NODES = 4


def _serve_config() -> dict[str, Any]:
    return {
        "tasks": {
            "sim": {
                "handler": "support.scripted_stages:build_scripted",
                "options": {**SCRIPT, "track": False},
            }
        },
        "llm": {"health_path": None},
    }


def _rollout_resources(i: int) -> dict[str, float]:
    """Node i offers `rollout_nN` for every N > i: an executor asked for `rollout_nN` uses
    exactly N nodes of the one cluster."""
    return {f"rollout_n{n}": 1.0 for n in NODE_COUNTS if i < n}


def start_cluster(nodes: int) -> Any:
    cluster = start_local_cluster({"resources": _rollout_resources(0)})
    try:
        connect(cluster)  # while the machine is still quiet: the driver registers with the head
        for i in range(1, nodes):
            add_local_node(cluster, resources=_rollout_resources(i))
        cluster.wait_for_nodes()
    except BaseException:
        shutdown_local_cluster(cluster)
        raise
    return cluster


class CpuMeter:
    """CPU seconds of this process and all its descendants, over a window."""

    def __init__(self) -> None:
        self.t0 = time.monotonic()
        self.cpu0 = self._cpu()

    @staticmethod
    def _cpu() -> float:
        me = psutil.Process()
        total = 0.0
        for proc in [me, *me.children(recursive=True)]:
            with contextlib.suppress(psutil.Error):
                times = proc.cpu_times()
                total += times.user + times.system
        return total

    def share(self) -> float:
        wall = time.monotonic() - self.t0
        return max(0.0, self._cpu() - self.cpu0) / (wall * (psutil.cpu_count() or 1))


def steady_throughput(results: list[JobResult], warmup: int) -> float:
    """Jobs per second between the end of the warm-up wave and the last job."""
    ends = sorted(r.finished_at or 0.0 for r in results)
    if len(ends) <= warmup:
        return 0.0
    span = ends[-1] - ends[warmup - 1]
    return (len(ends) - warmup) / span if span > 0 else 0.0


async def start_pipeline(executor: StageExecutor, slots: int, jobs: int) -> Pipeline:
    """The pipeline every point runs: `slots` workers per stage, room for all `jobs` at once."""
    handler = ScriptedHandler(track=False, **SCRIPT)  # the service's copy; the nodes build theirs
    registry = HandlerRegistry()
    registry.register("sim", handler)
    config = PipelineConfig(
        init_workers=slots, run_workers=slots, eval_workers=slots, max_queued=jobs, active_time_s=600
    )
    pipeline = Pipeline(registry, config, executor)
    await pipeline.start()
    return pipeline


async def measure(executor: StageExecutor, slots: int, jobs: int) -> dict[str, Any]:
    pipeline = await start_pipeline(executor, slots, jobs)
    try:
        meter = CpuMeter()
        started = time.monotonic()
        ids = pipeline.submit([JobSpec(task="sim") for _ in range(jobs)])
        results, pending = await pipeline.wait(ids, timeout=900)
        wall = time.monotonic() - started
        cpu = meter.share()
    finally:
        await pipeline.stop()
    done = [r for r in results if r.state is JobState.DONE]
    return {
        "jobs": jobs,
        "done": len(done),
        "pending": len(pending),
        "wall_s": round(wall, 3),
        "throughput": round(steady_throughput(done, slots), 3),
        "cpu_share": round(cpu, 3),
        "cpu_bound": cpu > CPU_BOUND,
    }


def ray_executor(nodes: int, **extra: Any) -> RayExecutor:
    # Room for every job the pipeline's pools can hold on a node (INIT, RUN and EVAL workers
    # plus the RUN queue), so the pools bind both runs alike and the baseline differs only in
    # where stages execute.
    config = RayExecutorConfig(
        slots_per_node=4 * SLOTS,
        resource=f"rollout_n{nodes}",
        health_interval_s=0.5,
        node_timeout_s=15,
        **extra,
    )
    data = _serve_config()
    handlers = functools.partial(serve_handlers, data)
    llm = validate_config(data).llm.model_dump(mode="json")
    return RayExecutor(config, functools.partial(build_node, llm, handlers))


async def scaling_point(nodes: int) -> dict[str, Any]:
    slots = nodes * SLOTS
    jobs = WAVES * slots
    executor = ray_executor(nodes)
    await executor.start()
    assert len(executor.nodes()) == nodes, executor.nodes()
    ray_point = await measure(executor, slots, jobs)  # stop() closes the executor
    inproc = await measure(InProcessExecutor(), slots, jobs)
    return {"nodes": nodes, "slots": slots, "ray": ray_point, "inprocess": inproc}


async def node_loss_run(cluster: Any) -> dict[str, Any]:
    executor = ray_executor(KILL_NODES)
    await executor.start()
    slots = KILL_NODES * SLOTS
    jobs = WAVES * slots
    pipeline = await start_pipeline(executor, slots, jobs)
    head = cluster.head_node.node_id
    used = {s.node for s in executor.nodes()}
    victims = [n for n in cluster.list_all_nodes() if n.node_id in used and n.node_id != head][:2]
    assert len(victims) == 2, f"need two worker nodes among {len(used)} to remove"
    job_s = SCRIPT["init_s"] + SCRIPT["run_s"] + SCRIPT["eval_s"]
    try:
        started = time.monotonic()
        ids = pipeline.submit([JobSpec(task="sim") for _ in range(jobs)])
        await asyncio.sleep(job_s * 1.5)  # mid-way through the second wave
        with children_write_to_stderr():
            await asyncio.to_thread(cluster.remove_node, victims[0], True)  # graceful
        await asyncio.sleep(job_s * 0.5)
        with children_write_to_stderr():
            await asyncio.to_thread(cluster.remove_node, victims[1], False)  # SIGKILL its raylet
        results, pending = await pipeline.wait(ids, timeout=900)
        wall = time.monotonic() - started
    finally:
        await pipeline.stop()
    done = [r for r in results if r.state is JobState.DONE]
    return {
        "nodes": KILL_NODES,
        "removed": ["graceful", "raylet killed"],
        "submitted": jobs,
        "completed": len(done),
        "failed": len([r for r in results if r.state is JobState.FAILED]),
        "masked": len([r for r in results if r.mask_sample]),
        "pending": len(pending),
        "rerun": sum(r.infra_retries for r in results),
        "wall_s": round(wall, 3),
    }


def benchmark() -> dict[str, Any]:
    # Nodes start in the main thread (Ray's node start installs signal handlers); their workers
    # import the scripted handler from tests/support, as this process does.
    os.environ["PYTHONPATH"] = subprocess_env(os.environ)["PYTHONPATH"]
    cluster = start_cluster(max(NODE_COUNTS))
    try:
        points, loss = asyncio.run(_measure_all(cluster))
    finally:
        leftover = shutdown_local_cluster(cluster)
    x1 = points[0]["ray"]["throughput"]
    report: dict[str, Any] = {
        "simulated": SIMULATED,
        "script_s": SCRIPT,
        "slots_per_node": SLOTS,
        "points": points,
        "node_kill": loss,
        "node_kill_submitted": loss["submitted"],
        "node_kill_completed": loss["completed"],
        "node_kill_rerun": loss["rerun"],
        "leftover_ray_processes": len(leftover),
    }
    for p in points:
        n = p["nodes"]
        eff = p["ray"]["throughput"] / (n * x1) if x1 > 0 else 0.0
        p["efficiency"] = round(eff, 3)
        report[f"efficiency_n{n}"] = round(eff, 3)
    last = points[-1]
    base = last["inprocess"]["throughput"]
    report["ray_overhead_ratio"] = round(last["ray"]["throughput"] / base, 3) if base > 0 else 0.0
    report["cpu_bound_points"] = [p["nodes"] for p in points if p["ray"]["cpu_bound"]]
    return report


async def _measure_all(cluster: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    points = []
    for n in NODE_COUNTS:
        points.append(await scaling_point(n))
        print(f"[scaleout] {json.dumps(points[-1])}", file=sys.stderr, flush=True)  # progress
    return points, await node_loss_run(cluster)


def summary(r: dict[str, Any]) -> str:
    """The README row: efficiencies, Ray's overhead and the node-loss run."""
    effs = ", ".join(f"E({p['nodes']}) {p['efficiency']:.2f}" for p in r["points"][1:])
    k = r["node_kill"]
    return (
        f"{effs}; Ray / in-process {r['ray_overhead_ratio']:.2f} at {r['points'][-1]['nodes']} nodes; "
        f"2 of {k['nodes']} nodes lost mid-run (one graceful, one raylet killed): "
        f"{k['completed']}/{k['submitted']} jobs completed, {k['rerun']} re-run"
    )


def format_report(r: dict[str, Any]) -> str:
    lines = [
        "Scale-out on Ray (SIMULATED work: stage latencies are sleeps; real raylets, actors, pipeline)",
        f"  per job: INIT {SCRIPT['init_s']}s, RUN {SCRIPT['run_s']}s in {SCRIPT['turns']} turns, "
        f"EVAL {SCRIPT['eval_s']}s; {r['slots_per_node']} workers per stage per node; first wave is warm-up",
        "",
        f"  {'nodes':>5} {'pool':>5} {'jobs':>5} {'X ray/s':>8} {'E(N)':>6} {'X in-proc/s':>11} "
        f"{'ray/in-proc':>11} {'CPU':>5}",
    ]
    for p in r["points"]:
        ray_x, in_x = p["ray"]["throughput"], p["inprocess"]["throughput"]
        ratio = ray_x / in_x if in_x else 0.0
        flag = " CPU-bound" if p["ray"]["cpu_bound"] else ""
        lines.append(
            f"  {p['nodes']:>5} {p['slots']:>5} {p['ray']['jobs']:>5} {ray_x:>8.2f} {p['efficiency']:>6.2f} "
            f"{in_x:>11.2f} {ratio:>11.2f} {p['ray']['cpu_share']:>5.0%}{flag}"
        )
    k = r["node_kill"]
    lines += [
        "",
        f"  Ray overhead at {r['points'][-1]['nodes']} nodes: X_ray / X_inprocess = {r['ray_overhead_ratio']:.2f}",
        f"  Node loss ({k['nodes']} nodes; one removed gracefully, one raylet killed): "
        f"submitted {k['submitted']}, completed {k['completed']}, re-run {k['rerun']}, "
        f"failed {k['failed']}, pending {k['pending']}",
    ]
    return "\n".join(lines)


def main(as_json: bool = False) -> int:
    """`prorl bench scaleout [--json]`."""
    with children_write_to_stderr():  # Ray's driver prints node deaths to stdout
        report = benchmark()
    provenance.publish(
        "scaleout", report, as_json=as_json, render=format_report, summary=summary, simulated=SIMULATED,
        ours="Ray executor: one rollout actor per node, 1-8 real raylets on one machine",
        against="the in-process executor with the same worker pools",
    )  # fmt: skip
    ok = report["node_kill_completed"] == report["node_kill_submitted"]
    return 0 if ok else 1
