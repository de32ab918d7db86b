# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""`prorl bench recovery` counts what a killed service left: the processes of its whole tree
(its worker processes and theirs), read before the kill, and the cgroups named after any pid of
that tree, with their members. A check that finds nothing only because it looks in the wrong
place cannot pass here."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from nemo_gym_prorl.sandbox.limits import writable_controllers


def _tree_of_three(recovery: Any, pid: int) -> set[int]:
    deadline = time.monotonic() + 10
    while len(tree := recovery.service_tree(pid)) < 3:
        assert time.monotonic() < deadline, "the stand-in service did not start its processes"
        time.sleep(0.05)
    return tree


def test_a_killed_services_orphans_and_its_workers_cgroups_count_as_left(bench: Any, tmp_path: Path) -> None:
    recovery = bench("bench_recovery")

    # A stand-in service with a "worker" that has a "sandbox process" of its own.
    group: Path | None = None
    service = subprocess.Popen(["/bin/sh", "-c", "sh -c 'sleep 60 & wait' & wait"], start_new_session=True)
    try:
        tree = _tree_of_three(recovery, service.pid)
        assert service.pid in tree, tree
        worker = max(tree - {service.pid})
        parent = writable_controllers().get("pids")
        if parent is not None:
            group = parent / f"{worker}-bench-recovery-test"
            group.mkdir(parents=True)
        (tmp_path / "sandboxes" / "some-sandbox").mkdir(parents=True)

        service.send_signal(signal.SIGKILL)
        service.wait(timeout=10)
        debris = recovery._debris(tmp_path / "sandboxes", tree)
        left = recovery._still_there(debris)
        assert left["processes"] >= 2, debris  # the orphans outlive the killed service
        assert left["directories"] == 1
        if group is not None:
            assert debris["cgroups"] == {str(group)} and left["cgroups"] == 1

        for pid in tree - {service.pid}:
            os.kill(pid, signal.SIGKILL)
        if group is not None:
            group.rmdir()
            group = None
        (tmp_path / "sandboxes" / "some-sandbox").rmdir()
        deadline = time.monotonic() + 10
        while sum(recovery._still_there(debris).values()):
            assert time.monotonic() < deadline, recovery._still_there(debris)
            time.sleep(0.05)
    finally:
        # Only what this test started: the stand-in's process group (its session, its pgid).
        with contextlib.suppress(ProcessLookupError):
            os.killpg(service.pid, signal.SIGKILL)
        if group is not None:
            with contextlib.suppress(OSError):
                group.rmdir()
