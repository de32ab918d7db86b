# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""`kill -9` of a running service leaves no sandbox process alive.

The service runs as `prorl serve` would (the same entry point, in a subprocess) with a handler
that opens real bubblewrap sandboxes and starts a long-lived process in each. Survivors are
looked for by what was recorded per sandbox (its pids cgroup and process ids), never by name.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from support.processes import alive
from support.scripted_serve import start_scripted_serve

from nemo_gym_prorl.process_identity import start_ticks

pytestmark = [
    pytest.mark.bwrap,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed"),
]


def cgroup_members(path: str) -> list[int]:
    try:
        return [int(p) for p in Path(path, "cgroup.procs").read_text().split()]
    except OSError:
        return []


def created(pid: int) -> int | None:
    return start_ticks(pid, exiting=True)


def start_service(tmp_path: Path, record: Path) -> tuple[subprocess.Popen[str], str]:
    return start_scripted_serve(tmp_path, [f"+tasks.box.options.record_file={record}", "server.port=0"])


def test_kill_minus_9_leaves_no_sandbox_process(tmp_path: Path) -> None:
    record = tmp_path / "sandboxes.jsonl"
    proc, url = start_service(tmp_path, record)
    entries: list[dict[str, object]] = []
    try:
        jobs = [{"task": "box", "instance": {"script": {"keepalive": True, "run_s": 120}}} for _ in range(3)]
        ids = httpx.post(f"{url}/v1/rollouts", json={"jobs": jobs}, timeout=30).json()["ids"]
        deadline = time.monotonic() + 60
        while True:  # all three in RUN, each with a live sandbox and its keepalive process
            states = [httpx.get(f"{url}/v1/rollouts/{i}", timeout=30).json()["state"] for i in ids]
            if states == ["run"] * 3 and record.exists() and len(record.read_text().splitlines()) == 3:
                break
            assert time.monotonic() < deadline, states
            time.sleep(0.1)
        entries = [json.loads(line) for line in record.read_text().splitlines()]
        pids = [pid for e in entries for pid in e["pids"]]  # type: ignore[attr-defined]
        cgroups = [str(e["cgroup"]) for e in entries if e["cgroup"]]
        assert len(pids) == 3 and all(alive(p) for p in pids)
        members_before = {cg: cgroup_members(cg) for cg in cgroups}
        assert all(members_before.values()), "the sandboxes' cgroups should hold their processes"
        # With start times: on a busy machine a pid can be reused within seconds of its process's end.
        started = {p: created(p) for members in members_before.values() for p in members}

        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)

        # Every process that was ever in a sandbox cgroup goes too (not only the recorded ones).
        # Waited for with the rest: a process leaves its cgroup as it starts to exit, and on a busy
        # machine it can take a moment more before it is a zombie.
        def left() -> tuple[list[int], dict[str, list[int]], list[int]]:
            return (
                [p for p in pids if alive(p)],
                {cg: members for cg in cgroups if (members := cgroup_members(cg))},
                [p for p, t in started.items() if t is not None and alive(p, t)],
            )

        deadline = time.monotonic() + 10
        while any(left()):
            assert time.monotonic() < deadline, left()
            time.sleep(0.05)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for entry in entries:  # the dead service could not remove its (now empty) cgroups
            if entry.get("cgroup"):
                try:
                    Path(str(entry["cgroup"])).rmdir()
                except OSError:
                    pass
