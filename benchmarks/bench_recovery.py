# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""kill -9 at full size: `prorl serve` with `--jobs` rollouts in flight (real sandboxes, each
with its shell) and a DAPO batch running is killed with SIGKILL, then started again on the
same journal and port, while a client streams every id across the kill and the restart.

Counted: ids that never came back (lost), ids that came back more than once (duplicated),
jobs run again (`resumed`), jobs the second service started (only the unfinished ones may be),
the DAPO batch's resumption, and what the dead service left that is still there once the
second one is up: processes, cgroups and directories of its sandboxes.

`make test-e2e` runs the same at a reduced size (tests/service/test_crash_recovery.py).

SIMULATED: the model (sim_vllm); the service, sandboxes, shells, grading and the kill are real.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import psutil
from bench_load import MAX_NUM_SEQS, SIM_NICENESS, _start_service
from sim_vllm import AgentBackendSpec

import provenance  # first: it notes the load average the run starts under
from balancer_sim import SimulatedBackends
from nemo_gym_prorl.sandbox.limits import writable_controllers
from nemo_gym_prorl.tasks.command_output import make_rows

SIMULATED = [
    "model: simulated vLLM backends (sim_vllm at a GPU batch's speed); the service, sandboxes, shells, "
    "grading and the kill are real",
]
PROMPTS, GROUP = 8, 4


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _collect(
    url: str, ids: list[str], counts: collections.Counter[str], results: dict[str, Any]
) -> None:
    """The trainer's side: one stream over the ids not received yet, again after each cut."""
    left = set(ids)
    deadline = time.monotonic() + 1800
    async with httpx.AsyncClient(base_url=url, timeout=httpx.Timeout(900, connect=5)) as http:
        while left and time.monotonic() < deadline:
            try:
                async with http.stream(
                    "POST", "/v1/rollouts/stream", json={"ids": sorted(left), "timeout_s": 900}
                ) as s:
                    async for line in s.aiter_lines():
                        event = json.loads(line) if line else {}
                        if event.get("type") == "result":
                            result = event["result"]
                            counts[result["id"]] += 1
                            results[result["id"]] = {
                                "state": result["state"],
                                "resumed": result.get("resumed", 0),
                            }
                            left.discard(result["id"])
            except (httpx.TransportError, httpx.HTTPStatusError):
                await asyncio.sleep(0.5)  # the service is down: ask again once it is back


def service_tree(pid: int) -> set[int]:
    """The service and every process below it now (its workers, their sandboxes' processes):
    read before the kill, since the kernel hands orphans to another parent after it."""
    with contextlib.suppress(psutil.Error):
        return {pid, *(child.pid for child in psutil.Process(pid).children(recursive=True))}
    return {pid}


def _debris(sandbox_root: Path, tree: set[int]) -> dict[str, set[str]]:
    """What a service left: the processes of its tree still alive and every member of its cgroups
    (named after the pid of the process that made them: the service's, or a worker's), its
    sandboxes' directories."""
    cgroups = {
        str(child) for parent in set(writable_controllers().values()) if parent.is_dir()
        for child in parent.iterdir()
        if child.is_dir() and child.name.split("-", 1)[0].isdigit() and int(child.name.split("-", 1)[0]) in tree
    }  # fmt: skip
    members = set()
    for group in cgroups:
        with contextlib.suppress(OSError):
            members.update((Path(group) / "cgroup.procs").read_text().split())
    processes = {str(pid) for pid in tree if Path(f"/proc/{pid}").exists()} | members
    dirs = {str(p) for p in sandbox_root.iterdir()} if sandbox_root.exists() else set()
    return {"processes": processes, "cgroups": cgroups, "directories": dirs}


def _still_there(debris: dict[str, set[str]]) -> dict[str, int]:
    return {
        "processes": sum(1 for pid in debris["processes"] if Path(f"/proc/{pid}").exists()),
        "cgroups": sum(1 for path in debris["cgroups"] if Path(path).exists()),
        "directories": sum(1 for path in debris["directories"] if Path(path).exists()),
    }


async def _in_flight(http: httpx.AsyncClient) -> int:
    stages = (await http.get("/v1/status")).json()["pipeline"]["stages"]
    return int(stages["run"]["in_flight"])


async def measure(jobs: int, say: provenance.Say) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="prorl-bench-recovery-"))
    sandbox_root = workdir / "sandboxes"
    port = _free_port()
    spec = AgentBackendSpec(max_num_seqs=MAX_NUM_SEQS)
    counts: collections.Counter[str] = collections.Counter()
    results: dict[str, Any] = {}
    second = None
    try:
        with SimulatedBackends([spec] * 4, niceness=SIM_NICENESS) as urls:
            first, url = _start_service(jobs + 64, workdir, urls, port=port)
            async with httpx.AsyncClient(base_url=url, timeout=120) as http:
                rows = make_rows(jobs)
                ids: list[str] = []
                for i in range(0, jobs, 500):
                    reply = await http.post(
                        "/v1/rollouts", json={"jobs": [{"instance": r} for r in rows[i : i + 500]]}
                    )
                    ids += reply.json()["ids"]
                batch = (await http.post("/v1/batches", json={
                    "groups": PROMPTS, "source": {"rows": make_rows(PROMPTS, seed=3)},
                    "config": {"group_size": GROUP, "max_prompts_in_flight": PROMPTS},
                })).json()  # fmt: skip
                dapo_ids = [
                    f"{batch['session_id']}-{p}-s{s}-a0" for p in range(1, PROMPTS + 1) for s in range(GROUP)
                ]
                collecting = asyncio.create_task(_collect(url, ids + dapo_ids, counts, results))
                started = time.monotonic()
                while True:  # every plain job runs in a live sandbox
                    running = await _in_flight(http)
                    if running >= jobs or time.monotonic() - started >= 300:
                        break
                    await asyncio.sleep(0.5)
                # Then kill once the sandboxes' shells run too (their first tool call follows a
                # model turn), so that the processes a crash could leave exist; or once rollouts
                # start to end.
                shells_by = time.monotonic() + 60
                while True:
                    tree = service_tree(first.pid)
                    if (
                        len(tree) >= 2 * jobs
                        or time.monotonic() >= shells_by
                        or await _in_flight(http) < jobs
                    ):
                        break
                    await asyncio.sleep(0.5)
                finished_before = len(results)
                say(
                    f"{running} rollouts in flight, {finished_before} finished, {len(tree)} processes: kill -9"
                )
            tree = service_tree(first.pid)
            first.send_signal(signal.SIGKILL)
            first.wait(timeout=30)
            debris = _debris(sandbox_root, tree)
            at_kill = {kind: len(found) for kind, found in debris.items()}
            killed_at = time.monotonic()
            second, _ = _start_service(jobs + 64, workdir, urls, port=port)
            restarted_s = time.monotonic() - killed_at
            left_after_restart = _still_there(debris)
            await asyncio.wait_for(collecting, timeout=1800)
            async with httpx.AsyncClient(base_url=url, timeout=120) as http:
                status = (await http.get("/v1/status")).json()["pipeline"]
                ended = (await http.get(f"/v1/batches/{batch['batch_id']}", params={"wait_s": 120})).json()
            # Once every result is back: what is still there now is left for good (a worker of the
            # dead service may still be ending its own sandboxes when the second one is up).
            left_at_end = _still_there(debris)
    finally:
        if second is not None:
            second.send_signal(signal.SIGTERM)
            second.wait(timeout=120)
        shutil.rmtree(workdir, ignore_errors=True)
    every = ids + dapo_ids
    resumed = collections.Counter(int(r["resumed"]) for r in results.values())
    return {
        "jobs": jobs,
        "dapo_samples": len(dapo_ids),
        "in_flight_at_kill": running,
        "finished_before_kill": finished_before,
        "restart_s": restarted_s,
        "lost": sum(1 for i in every if counts[i] == 0),
        "duplicated": sum(1 for i in every if counts[i] > 1),
        "not_done": sum(1 for r in results.values() if r["state"] != "done"),
        "resumed": {str(k): v for k, v in sorted(resumed.items())},
        "started_by_second_service": status["submitted_total"],
        "dapo_batch": {"resumed": ended.get("resumed"), "status": ended.get("status")},
        # How many processes the check looked for: the service, its workers and their sandboxes'.
        "dead_service_processes_before_kill": len(tree),
        "dead_service_left_at_kill": at_kill,
        "dead_service_left_after_restart": left_after_restart,
        "dead_service_left_at_end": left_at_end,
        "cpu_count": os.cpu_count(),
        "simulated": SIMULATED,
    }


def format_report(r: dict[str, Any]) -> str:
    return (
        f"kill -9 with {r['in_flight_at_kill']} rollouts in flight ({r['finished_before_kill']} finished before), "
        f"restart in {r['restart_s']:.1f} s: lost {r['lost']}, duplicated {r['duplicated']}, not done {r['not_done']}; "
        f"resumed {r['resumed']}; the second service started {r['started_by_second_service']}; DAPO batch "
        f"{r['dapo_batch']}\n  left by the dead service ({r.get('dead_service_processes_before_kill')} processes "
        f"before the kill): at the kill {r['dead_service_left_at_kill']}, "
        f"after the restart {r['dead_service_left_after_restart']}, once every result was back "
        f"{r['dead_service_left_at_end']}"
    )


def summary(r: dict[str, Any]) -> str:
    left = sum(r.get("dead_service_left_at_end", r["dead_service_left_after_restart"]).values())
    return (
        f"kill -9 at {r['in_flight_at_kill']} in flight: {r['lost']} lost, {r['duplicated']} duplicated, "
        f"{left} left behind once every result was back"
    )


def main(as_json: bool = False, argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="prorl bench recovery")
    parser.add_argument("--jobs", type=int, default=1000, help="plain rollouts in flight at the kill")
    args = parser.parse_args(argv or [])

    def say(message: str) -> None:
        print(f"[bench recovery] {message}", file=sys.stderr if as_json else sys.stdout, flush=True)

    figures = asyncio.run(measure(args.jobs, say))
    return provenance.publish(
        "recovery", figures, as_json=as_json, render=format_report, summary=summary, simulated=SIMULATED,
        ours="kill -9 of prorl serve with {in_flight_at_kill} rollouts in flight, restart on its journal",
        against="nothing lost, nothing duplicated, nothing of the dead service left",
    )  # fmt: skip
