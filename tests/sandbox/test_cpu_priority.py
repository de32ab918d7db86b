# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""A sandbox runs below the service's CPU priority and cannot raise itself back: a rollout
that computes hard never starves the event loop that drives every other rollout."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from nemo_gym_prorl.sandbox import SandboxLimits, SandboxSpec, open_sandbox
from nemo_gym_prorl.sandbox.limits import writable_controllers

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (`bwrap`) is not installed")

NICENESS = "cut -d' ' -f19 /proc/self/stat"  # field 19 of stat: the process's nice value


async def test_every_process_of_a_sandbox_runs_at_its_lower_priority() -> None:
    with open_sandbox() as sb:
        assert (await sb.exec(NICENESS)).stdout.strip() == "10"
        assert (await sb.exec(f'sh -c "{NICENESS}"')).stdout.strip() == "10", "children inherit it"


async def test_a_sandbox_cannot_raise_its_priority_again() -> None:
    with open_sandbox() as sb:
        raised = await sb.exec(f"nice -n -10 {NICENESS}")
        assert "Permission denied" in raised.stderr and raised.stdout.strip() == "10"
        python = await sb.exec(["python3", "-c", "import os; os.setpriority(os.PRIO_PROCESS, 0, 0)"])
        assert python.exit_code != 0 and "PermissionError" in python.stderr


async def test_the_priority_is_a_setting() -> None:
    with open_sandbox(SandboxSpec(limits=SandboxLimits(nice=19))) as sb:
        assert (await sb.exec(NICENESS)).stdout.strip() == "19"
    with open_sandbox(SandboxSpec(limits=SandboxLimits(nice=None))) as sb:
        assert (await sb.exec(NICENESS)).stdout.strip() == "0"


def _cpu_group_of(pid: int) -> Path | None:
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "cpu" in controllers.split(","):
            return Path("/sys/fs/cgroup/cpu") / path.lstrip("/")
    return None


@pytest.mark.skipif(
    "cpu" not in writable_controllers(),
    reason="no writable cpu cgroup for this user (a root service's, or a delegated v2 subtree)",
)
async def test_all_sandboxes_together_weigh_as_one_program_beside_the_service(tmp_path: Path) -> None:
    # nice ranks a process only within its scheduling group; with autogroups every sandbox's
    # session would weigh as much as the whole service. One parent group of the default weight
    # holds them all, so together they weigh as one program.
    async with (
        open_sandbox(SandboxSpec(root_dir=tmp_path)) as a,
        open_sandbox(SandboxSpec(root_dir=tmp_path)) as b,
    ):
        sleepers = [
            await sb.spawn(["sh", "-c", "echo up; sleep 30"], stdout=asyncio.subprocess.PIPE) for sb in (a, b)
        ]
        try:
            for p in sleepers:  # running inside: every group joined
                assert p.stdout is not None and await asyncio.wait_for(p.stdout.readline(), 30) == b"up\n"
            groups = [_cpu_group_of(p.pid) for p in sleepers]
        finally:
            for p in sleepers:
                p.kill()
                await p.wait()
    assert None not in groups and groups[0] != groups[1], "each sandbox has its own cpu group"
    parents = {group.parent for group in groups if group is not None}
    assert len(parents) == 1, "below one parent"
    (parent,) = parents
    weight = parent / "cpu.shares"
    if weight.exists():  # v1
        assert weight.read_text().strip() == "1024"
    else:  # v2
        assert (parent / "cpu.weight").read_text().strip() == "100"
