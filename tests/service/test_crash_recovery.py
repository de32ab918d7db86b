# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""`kill -9` with jobs in flight, then a restart on the same journal: nothing is lost.

A real `prorl serve` (its own process, real bubblewrap sandboxes with a long-lived process in
each) takes 32 plain jobs and a DAPO batch of 4 prompts x 2 samples, and is killed with SIGKILL
while most of them run. A second `prorl serve` on the same port and journal then:
- answers every accepted job exactly once under its id: what had finished from the journal
  (`resumed: 0`), what was in flight run again (`resumed: 1`);
- resumes the DAPO batch under its id, and judges each of its prompts once;
- has removed what the dead one left: its sandboxes' processes, cgroups and directories.
A client (`RolloutClient.stream`) waiting on every id across the kill and the restart gets each
result once. Reduced size; `make test-e2e` runs it.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

import httpx
import pytest
from service_helpers import free_port
from support.processes import alive
from support.scripted_serve import start_scripted_serve

from nemo_gym_prorl.pipeline import JobResult, JobState
from nemo_gym_prorl.service.client import RolloutClient

pytestmark = [
    pytest.mark.bwrap,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed"),
]

PLAIN_QUICK, PLAIN_SLOW, PROMPTS, GROUP = 8, 24, 4, 2


def start_service(tmp_path: Path, port: int, run_s: float) -> subprocess.Popen[str]:
    """`prorl serve` with the scripted sandbox handler, whose rollouts last `run_s` unless a job
    says otherwise; returns once it listens."""
    proc, _ = start_scripted_serve(tmp_path, [
        f"+tasks.box.options.record_file={tmp_path / 'sandboxes.jsonl'}",
        f"+tasks.box.options.run_s={run_s}",
        "+tasks.box.options.keepalive=true",
        f"server.port={port}",
        f"journal.path={tmp_path / 'journal.sqlite3'}",
    ], ready_s=90)  # fmt: skip
    return proc


def sandboxes(tmp_path: Path) -> list[dict[str, object]]:
    record = tmp_path / "sandboxes.jsonl"
    return [json.loads(line) for line in record.read_text().splitlines()] if record.exists() else []


def cgroup_members(path: str) -> list[int]:
    try:
        return [int(p) for p in Path(path, "cgroup.procs").read_text().split()]
    except OSError:
        return []


def collect(url: str, ids: list[str], into: list[JobResult], errors: list[BaseException]) -> None:
    """The trainer's side: one stream over every id, across the kill and the restart."""
    try:
        with RolloutClient(url, timeout=30) as client:
            into.extend(client.stream(ids, timeout_s=300))
    except BaseException as exc:  # reported by the test
        errors.append(exc)


def test_kill_minus_9_with_jobs_in_flight_then_a_restart_loses_nothing(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    first = start_service(tmp_path, port, run_s=600)
    second: subprocess.Popen[str] | None = None
    try:
        quick = [
            {
                "id": f"quick-{i}",
                "task": "box",
                "instance": {"n": i, "script": {"run_s": 0, "keepalive": False}},
            }
            for i in range(PLAIN_QUICK)
        ]
        slow = [{"id": f"slow-{i}", "task": "box", "instance": {"n": i}} for i in range(PLAIN_SLOW)]
        plain_ids = httpx.post(f"{url}/v1/rollouts", json={"jobs": quick + slow}, timeout=60).json()["ids"]
        batch = httpx.post(
            f"{url}/v1/batches",
            json={
                "groups": PROMPTS,
                "source": {"rows": [{"p": k} for k in range(PROMPTS)]},
                "config": {"task": "box", "group_size": GROUP, "max_prompts_in_flight": PROMPTS},
            },
            timeout=60,
        ).json()
        batch_id, session_id = batch["batch_id"], batch["session_id"]
        dapo_ids = [f"{session_id}-{p}-s{s}-a0" for p in range(1, PROMPTS + 1) for s in range(GROUP)]
        every_id = plain_ids + dapo_ids
        assert len(every_id) == 40

        results: list[JobResult] = []
        errors: list[BaseException] = []
        client = threading.Thread(target=collect, args=(url, every_id, results, errors), daemon=True)
        client.start()

        # Kill once the quick ones are done and every other job runs in a live sandbox.
        deadline = time.monotonic() + 120
        while True:
            states = {i: httpx.get(f"{url}/v1/rollouts/{i}", timeout=30).json()["state"] for i in every_id}
            running = [i for i, s in states.items() if s == "run"]
            quick_done = all(states[q["id"]] == "done" for q in quick)  # not still being graded
            if quick_done and len(running) == 40 - PLAIN_QUICK and len(sandboxes(tmp_path)) >= 40:
                break
            assert time.monotonic() < deadline, states
            time.sleep(0.2)
        dead = [e for e in sandboxes(tmp_path) if e["job"] in running]  # the quick ones closed theirs
        pids = [int(p) for e in dead for p in e["pids"]]  # type: ignore[attr-defined]
        cgroups = [str(e["cgroup"]) for e in dead if e["cgroup"]]
        dirs = [d for e in dead for d in (tmp_path / "sandboxes").glob(f"*-{e['sandbox']}")]
        assert (
            pids and all(alive(p) for p in pids) and len(dirs) == len(dead) and all(d.is_dir() for d in dirs)
        )

        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
        second = start_service(tmp_path, port, run_s=0.2)  # the same port and journal

        client.join(timeout=240)
        assert not client.is_alive() and errors == []

        # 0 lost, 0 duplicated: every accepted id came back once, each in a terminal state.
        assert sorted(r.id for r in results) == sorted(every_id)
        assert all(r.state is JobState.DONE for r in results), [(r.id, r.state, r.error) for r in results]
        resumed = {r.id: r.resumed for r in results}
        assert {i: resumed[i] for i in plain_ids} == {q["id"]: 0 for q in quick} | {s["id"]: 1 for s in slow}
        assert all(resumed[i] == 1 for i in dapo_ids)  # in flight at the kill: run again, and said so

        # The DAPO batch resumed under its id and judged each prompt once (all uniform: reward 1).
        ended = httpx.get(
            f"{url}/v1/batches/{batch_id}", params={"wait_s": 60, "include_groups": True}
        ).json()
        assert ended["resumed"] is True and ended["status"] == "exhausted", ended
        stats = ended["stats"]
        assert stats["uniform_groups"] + stats["informative_groups"] == PROMPTS
        assert stats["prompts_started"] == 0  # nothing new started: the source had been read
        status = httpx.get(f"{url}/v1/status", timeout=30).json()["pipeline"]
        assert status["submitted_total"] == len(every_id) - PLAIN_QUICK  # only the lost ones ran again

        # Nothing of the dead service is left: its sandboxes' processes, cgroups and directories.
        deadline = time.monotonic() + 20
        while True:
            left = (
                [p for p in pids if alive(p)],
                [c for c in cgroups if Path(c).exists() or cgroup_members(c)],
                [str(d) for d in dirs if d.exists()],
            )
            if not any(left):
                break
            assert time.monotonic() < deadline, left
            time.sleep(0.1)
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
