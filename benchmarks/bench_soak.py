# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The soak: a long stream of jobs through one `prorl serve`, to see that nothing grows.

Plain submissions (command_output rollouts, submitted in chunks, a bounded number
outstanding) and DAPO batches (a session over the same rows, G samples per prompt, the
simulated policy right about half the time so groups are informative) run side by side until
`--jobs` rollouts have finished. Every `--sample-every` finished rollouts the service's RSS,
threads and fds are sampled. After the service stops, whatever it left is counted: processes
still running as the sandbox identity or under the sandbox root, cgroups named for it, entries
under the sandbox root, IPython kernels.

Flat means: after warm-up (the first fifth), the peaks of RSS and fds in the second half of the
rest are at most `FLAT_MIB` and 32 above those of its first half. Every bound kept by count
(evicted ids, ended batch records) is lowered so that it fills during warm-up.

SIMULATED: the model (sim_vllm); the service, sandboxes, shells and grading are real.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from bench_load import MAX_NUM_SEQS, SIM_NICENESS, _Sampler, _start_service
from sim_vllm import AgentBackendSpec

import provenance  # first: it notes the load average the run starts under
from balancer_sim import SimulatedBackends
from nemo_gym_prorl.sandbox.limits import writable_controllers
from nemo_gym_prorl.tasks.command_output import make_rows
from scripted_handlers import stop_service

SIMULATED = [
    "model: simulated vLLM backends (sim_vllm, right about half the time); the service, sandboxes, "
    "shells and grading are real",
]
CONCURRENT = 256
OUTSTANDING = 2 * CONCURRENT  # plain jobs submitted and not yet finished
CHUNK = 128
DAPO_GROUPS, DAPO_G = 8, 4
FLAT_MIB = 64.0
# Finished results kept in memory (the rest are served from the journal): small, so the soak
# reaches the budget early and shows memory held at it.
RESULTS_BUDGET = 128 << 20
BATCH_BUDGET = 64 << 20  # DAPO batch records' samples, likewise
# The ids of evicted results remembered to answer 410 are bounded by count (default 100,000):
# lowered likewise, so they fill during warm-up and any growth after it is something else.
EVICTED_IDS = 10_000
# Ended DAPO batch records kept are bounded by count too (default 256, reached only after some
# 50,000 rollouts here): lowered likewise, or their filling would read as growth after warm-up.
MAX_BATCHES = 16


async def _plain(http: httpx.AsyncClient, target: int, done: list[int], rows: list[dict[str, Any]]) -> None:
    """Keep OUTSTANDING plain jobs in flight until `target` have finished."""
    submitted, outstanding = 0, set()
    while done[0] < target:
        while len(outstanding) < OUTSTANDING and submitted < target:
            chunk = [{"instance": rows[(submitted + i) % len(rows)]} for i in range(CHUNK)]
            reply = await http.post("/v1/rollouts", json={"jobs": chunk})
            reply.raise_for_status()
            outstanding.update(reply.json()["ids"])
            submitted += CHUNK
        reply = await http.post(
            "/v1/rollouts/wait", json={"ids": sorted(outstanding), "timeout_s": 30, "mode": "any"}
        )
        reply.raise_for_status()
        for result in reply.json()["results"]:
            if result["state"] in ("done", "failed", "cancelled", "timeout"):
                outstanding.discard(result["id"])
                done[0] += 1
                done[1 + (result["state"] != "done")] += 1


async def _dapo(http: httpx.AsyncClient, stop: asyncio.Event, counts: dict[str, int]) -> None:
    """DAPO batches one after another on one session until told to stop."""
    source = {"rows": make_rows(64, seed=7), "epochs": None}
    config = {"group_size": DAPO_G, "batch_groups": DAPO_GROUPS, "max_prompts_in_flight": 16}
    first: dict[str, Any] = {"source": source, "config": config}  # a session's are fixed at its start
    while not stop.is_set():
        reply = await http.post("/v1/batches", json={"session_id": "soak", "groups": DAPO_GROUPS, **first})
        first = {}
        if reply.status_code != 202:
            raise RuntimeError(f"POST /v1/batches: {reply.status_code} {reply.text}")
        batch_id = reply.json()["batch_id"]
        async with http.stream("GET", f"/v1/batches/{batch_id}/stream") as stream:
            async for line in stream.aiter_lines():
                if not line:
                    continue
                event = json.loads(line)
                counts[event["type"]] = counts.get(event["type"], 0) + 1
        counts["batches"] = counts.get("batches", 0) + 1


def _leftovers(sandbox_root: Path, service_pid: int) -> dict[str, int]:
    """What is still there after the service stopped."""
    processes = kernels = 0
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{name}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(sandbox_root) in cmdline:
            processes += 1
            kernels += "ipykernel" in cmdline or "kernel" in cmdline.split(" ")[-2:]
    cgroups = sum(
        1 for parent in set(writable_controllers().values()) if parent.is_dir()
        for child in parent.iterdir() if child.is_dir() and child.name.startswith(f"{service_pid}-")
    )  # fmt: skip
    left = sorted(p.name for p in sandbox_root.iterdir()) if sandbox_root.exists() else []
    if left:
        print(f"[bench soak] left under the sandbox root: {left[:5]}", file=sys.stderr)
    entries = len(left)
    return {"processes": processes, "kernels": kernels, "cgroups": cgroups, "sandbox_root_entries": entries}


async def soak(jobs: int, sample_every: int, say: provenance.Say) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="prorl-bench-soak-"))
    sandbox_root = workdir / "sandboxes"
    spec = AgentBackendSpec(max_num_seqs=MAX_NUM_SEQS, ttft_s=0.05, decode_tokens_per_s=2000.0)
    try:
        with SimulatedBackends([spec] * 4, niceness=SIM_NICENESS) as urls:
            proc, url = _start_service(
                CONCURRENT,
                workdir,
                urls,
                [
                    f"pipeline.max_retained_bytes={RESULTS_BUDGET}",
                    f"service.max_batch_bytes={BATCH_BUDGET}",
                    f"pipeline.max_evicted_ids={EVICTED_IDS}",
                    f"service.max_batches={MAX_BATCHES}",
                ],
            )
            try:
                series, dapo, done, wall = await _drive(url, proc.pid, sandbox_root, jobs, sample_every, say)
            finally:
                stop_service(proc)
            leftovers = _leftovers(sandbox_root, proc.pid)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    warm = len(series) // 5
    after = series[warm:] or series
    growth = (after[-1]["rss_bytes"] - after[0]["rss_bytes"]) / 2**20 if after else 0.0
    # Levelled off: the peaks of the second half after warm-up are no higher than those of the
    # first half (with a margin). One sample against another reads the instant's live rollouts
    # (their sockets, terminals and buffers), not growth.
    first_half, second_half = after[: len(after) // 2] or after, after[len(after) // 2 :] or after
    rss_peak_growth = (
        max(s["rss_bytes"] for s in second_half) - max(s["rss_bytes"] for s in first_half)
    ) / 2**20
    fds_peak_growth = max(s["fds"] for s in second_half) - max(s["fds"] for s in first_half)
    return {
        "jobs": done[0],
        "plain_done": done[1],
        "plain_not_done": done[2],
        "dapo": dapo,
        "wall_s": wall,
        "rollouts_per_s": done[0] / wall,
        "concurrent_rollouts": CONCURRENT,
        "series": series,
        "rss_after_warmup_mib": {
            "first": after[0]["rss_bytes"] / 2**20,
            "last": after[-1]["rss_bytes"] / 2**20,
            "max": max(s["rss_bytes"] for s in after) / 2**20,
        },
        "rss_growth_after_warmup_mib": growth,
        "fds_after_warmup": {
            "first": after[0]["fds"],
            "last": after[-1]["fds"],
            "max": max(s["fds"] for s in after),
        },
        "rss_peak_growth_second_half_mib": rss_peak_growth,
        "fds_peak_growth_second_half": fds_peak_growth,
        "flat": rss_peak_growth < FLAT_MIB and fds_peak_growth <= 32,
        "leftovers": leftovers,
        "nothing_left": not any(leftovers.values()),
        "results_budget_bytes": RESULTS_BUDGET,
        "batch_budget_bytes": BATCH_BUDGET,
        "evicted_ids_kept": EVICTED_IDS,
        "batch_records_kept": MAX_BATCHES,
        "cpu_count": os.cpu_count(),
        "simulated": SIMULATED,
    }


async def _drive(
    url: str, pid: int, sandbox_root: Path, jobs: int, sample_every: int, say: provenance.Say
) -> tuple[list[dict[str, Any]], dict[str, int], list[int], float]:
    sampler = _Sampler(pid, sandbox_root)
    series: list[dict[str, Any]] = []
    done = [0, 0, 0]  # finished plain jobs: all, done, not done
    dapo: dict[str, int] = {}
    stop = asyncio.Event()
    started = time.monotonic()
    async with httpx.AsyncClient(base_url=url, timeout=httpx.Timeout(600, connect=30)) as http:
        plain = asyncio.create_task(_plain(http, jobs, done, make_rows(4096)))
        batches = asyncio.create_task(_dapo(http, stop, dapo))
        next_sample = 0
        while not plain.done():
            await asyncio.wait({plain, batches}, timeout=1.0, return_when=asyncio.FIRST_COMPLETED)
            if batches.done() and batches.exception() is not None:
                plain.cancel()
                raise RuntimeError("the DAPO batches failed") from batches.exception()
            rollouts = done[0] + dapo.get("group", 0) * DAPO_G
            if rollouts >= next_sample:
                sampler.sample(disk=False)
                series.append({"rollouts": rollouts, "t_s": time.monotonic() - started,
                               "rss_bytes": sampler.rss[-1], "fds": sampler.fds[-1], "threads": sampler.threads[-1]})  # fmt: skip
                say(f"{rollouts} rollouts: RSS {sampler.rss[-1] / 2**20:.0f} MiB, {sampler.fds[-1]} fds")
                next_sample = rollouts + sample_every
        await plain
        stop.set()
        await batches
    return series, dapo, done, time.monotonic() - started


def format_report(r: dict[str, Any]) -> str:
    rss = r["rss_after_warmup_mib"]
    return (
        f"soak: {r['jobs']} plain rollouts ({r['plain_not_done']} not done) and {r['dapo'].get('batches', 0)} DAPO "
        f"batches in {r['wall_s']:.0f} s ({r['rollouts_per_s']:.1f} rollouts/s), {r['concurrent_rollouts']} at once\n"
        f"  RSS after warm-up {rss['first']:.0f} -> {rss['last']:.0f} MiB (max {rss['max']:.0f}); fds "
        f"{r['fds_after_warmup']['first']} -> {r['fds_after_warmup']['last']}; peaks of the second half over the "
        f"first: RSS {r['rss_peak_growth_second_half_mib']:+.0f} MiB, fds {r['fds_peak_growth_second_half']:+d}; "
        f"flat: {r['flat']}\n"
        f"  left behind: {r['leftovers']}"
    )


def summary(r: dict[str, Any]) -> str:
    return (
        f"{r['jobs']} rollouts and {r['dapo'].get('batches', 0)} DAPO batches: RSS peaks "
        f"{r['rss_peak_growth_second_half_mib']:+.0f} MiB in the second half after warm-up, "
        f"{sum(r['leftovers'].values())} things left behind"
    )


def main(as_json: bool = False, argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="prorl bench soak")
    parser.add_argument("--jobs", type=int, default=100_000, help="plain rollouts to finish")
    parser.add_argument("--sample-every", type=int, default=1000, help="sample the service every N rollouts")
    args = parser.parse_args(argv or [])

    def say(message: str) -> None:
        print(f"[bench soak] {message}", file=sys.stderr if as_json else sys.stdout, flush=True)

    figures = asyncio.run(soak(args.jobs, args.sample_every, say))
    return provenance.publish(
        "soak", figures, as_json=as_json, render=format_report, summary=summary, simulated=SIMULATED,
        ours="plain submissions and DAPO batches through one prorl serve",
        against="flat: after warm-up, RSS peaks of the second half under 64 MiB above the first's, nothing left behind",
    )  # fmt: skip
