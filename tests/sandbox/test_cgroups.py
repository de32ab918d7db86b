# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""A sandbox's cgroups: memory and CPU bound all its processes together, every process joins
every group (a joiner's too), and the groups go with the sandbox: on close, and after a kill -9
of their owner. Where a controller is not writable the checks that need it skip, saying so."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from nemo_gym_prorl.sandbox import SandboxLimits, SandboxSpec, open_sandbox
from nemo_gym_prorl.sandbox import limits as limits_module
from nemo_gym_prorl.sandbox.limits import reap_orphan_cgroups, writable_controllers
from nemo_gym_prorl.sandbox.persistent import PERSISTENT_BACKEND, JoinedBubblewrapSandbox

pytestmark = pytest.mark.bwrap

_CONTROLLERS = writable_controllers()
needs_memory = pytest.mark.skipif(
    "memory" not in _CONTROLLERS, reason="no writable memory cgroup here (v1 memory or delegated v2)"
)
needs_cpu = pytest.mark.skipif(
    "cpu" not in _CONTROLLERS, reason="no writable cpu cgroup here (v1 cpu or delegated v2)"
)

# Each copy is well under the per-process limit. The holder keeps its memory until the taker,
# having taken its own, says so: load cannot stagger the two apart.
_HOLDER = (
    "import os, time; b = bytearray({mib} << 20); print('holding', flush=True)\n"
    "while not os.path.exists('taken'): time.sleep(0.05)"
)
_TAKER = "b = bytearray({mib} << 20); open('taken', 'w').close()"


def _members(group: Path) -> list[int]:
    return [int(pid) for pid in (group / "cgroup.procs").read_text().split()]


@needs_memory
async def test_the_sandbox_memory_limit_bounds_its_processes_together(tmp_path: Path) -> None:
    limits = SandboxLimits(memory_mb=1024, sandbox_memory_mb=200)  # each process may reserve 1 GiB
    async with open_sandbox(SandboxSpec(root_dir=tmp_path, limits=limits)) as sb:
        alone = await sb.exec(["python3", "-c", _TAKER.format(mib=150)], timeout=60)
        assert alone.exit_code == 0, "150 MiB is under both limits"
        (sb.workspace / "taken").unlink()
        holder = await sb.spawn(["python3", "-c", _HOLDER.format(mib=150)], stdout=asyncio.subprocess.PIPE)
        assert holder.stdout is not None
        assert await asyncio.wait_for(holder.stdout.readline(), 60) == b"holding\n"
        taker = await sb.exec(["python3", "-c", _TAKER.format(mib=150)], timeout=60)
        if taker.exit_code != 0:
            sb.write_file("taken", "")  # the taker was killed: let the holder go
        holder_code = await asyncio.wait_for(holder.wait(), 60)
        # 300 MiB together is over 200: the kernel kills one of them (SIGKILL), whichever it picks.
        assert {holder_code, taker.exit_code} & {-9, 137}, (holder_code, taker.exit_code)


@needs_cpu
async def test_the_cpu_limit_caps_the_sandbox(tmp_path: Path) -> None:
    spin = "import time\nt = time.process_time(); end = time.time() + 1.5\nwhile time.time() < end: pass\nprint(time.process_time() - t)"
    async with open_sandbox(SandboxSpec(root_dir=tmp_path, limits=SandboxLimits(cpus=0.2))) as sb:
        result = await sb.exec(["python3", "-c", spin], timeout=60)
    assert result.exit_code == 0, result.stderr
    # 0.2 CPUs over 1.5 s of wall time is 0.3 s of CPU; an uncapped spin would take about 1.5 s.
    assert float(result.stdout) < 0.6


async def test_every_process_joins_every_group_and_close_removes_them(tmp_path: Path) -> None:
    limits = SandboxLimits(sandbox_memory_mb=512, cpus=1.0)
    sb = open_sandbox(SandboxSpec(root_dir=tmp_path, limits=limits))
    if sb._cgroup is None:
        sb.close()
        pytest.skip("no writable cgroup controller here")
    paths = sb._cgroup.paths
    assert set(sb._cgroup.controllers) == {"pids", "memory", "cpu"} & set(_CONTROLLERS)
    try:
        await sb.spawn(["sleep", "321"])
        await asyncio.sleep(0.3)
        members = sb.cgroup_members()  # bubblewrap, the sandbox's init and the sleep
        assert members
        for path in paths:
            assert set(_members(path)) == set(members), path
    finally:
        await sb.aclose()
    assert [path for path in paths if path.exists()] == []


async def test_a_joiner_enters_the_owners_groups(tmp_path: Path) -> None:
    limits = SandboxLimits(sandbox_memory_mb=512)
    owner = await asyncio.to_thread(
        open_sandbox, SandboxSpec(backend=PERSISTENT_BACKEND, root_dir=tmp_path, limits=limits)
    )
    try:
        if owner._cgroup is None or len(owner._cgroup.paths) < 2:
            pytest.skip("needs groups in more than one cgroup v1 hierarchy")
        joined = await asyncio.to_thread(JoinedBubblewrapSandbox, owner.join_grant())
        try:
            assert joined._cgroup is not None and joined._cgroup.paths == owner._cgroup.paths
            await joined.exec("setsid sleep 322 >/dev/null 2>&1 </dev/null &")
        finally:
            await joined.aclose()
        sleeper = next(
            p for p in owner.cgroup_members() if b"sleep\x00322" in Path(f"/proc/{p}/cmdline").read_bytes()
        )
        for path in owner._cgroup.paths:
            assert sleeper in _members(path), path
    finally:
        await owner.aclose()


def test_the_groups_of_a_killed_owner_are_reaped_in_every_controller(tmp_path: Path) -> None:
    owner_code = textwrap.dedent(f"""
        import asyncio
        from pathlib import Path
        from nemo_gym_prorl.sandbox import SandboxLimits, SandboxSpec, open_sandbox
        async def main():
            limits = SandboxLimits(sandbox_memory_mb=512, cpus=1.0)
            sb = open_sandbox(SandboxSpec(root_dir=Path({str(tmp_path)!r}), limits=limits))
            await sb.spawn(["sleep", "1000"])
            paths = sb._cgroup.paths if sb._cgroup else []
            print(" ".join(map(str, paths)) or "none", flush=True)
            await asyncio.sleep(1000)
        asyncio.run(main())
    """)
    owner = subprocess.Popen([sys.executable, "-c", owner_code], stdout=subprocess.PIPE, text=True)
    try:
        assert owner.stdout is not None
        line = owner.stdout.readline().split()
        if line == ["none"]:
            pytest.skip("no writable cgroup controller here")
        paths = [Path(p) for p in line]
        assert all(path.is_dir() for path in paths)
        owner.kill()
        owner.wait()
        # Another test worker's sandbox may reap them first: either way they must go.
        reaped = reap_orphan_cgroups()
        assert paths[0].name in reaped or not paths[0].exists()
        deadline = time.monotonic() + 10
        while any(path.exists() for path in paths) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [path for path in paths if path.exists()] == []
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()


async def test_a_controller_that_is_not_writable_is_left_out_and_logged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    discover = limits_module._controller_parent
    monkeypatch.setattr(limits_module, "_controller_parent", lambda c: None if c == "memory" else discover(c))
    with caplog.at_level(logging.WARNING, logger=limits_module.__name__):
        sb = open_sandbox(SandboxSpec(root_dir=tmp_path, limits=SandboxLimits(sandbox_memory_mb=256)))
    try:
        assert sb._cgroup is None or "memory" not in sb._cgroup.controllers
        assert "memory limit is not enforced" in caplog.text
        assert (await sb.exec("true")).exit_code == 0
    finally:
        await sb.aclose()


def test_a_group_whose_members_are_slow_to_exit_is_removed_by_a_later_removal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # On a machine busy enough, killed members outlast the close's second of retries: the group
    # is kept for later and goes with the next removal, so none piles up while the service runs.
    monkeypatch.setattr(limits_module.time, "sleep", lambda seconds: None)
    left: set[Path] = set()
    monkeypatch.setattr(limits_module, "_LEFT_FOR_LATER", left)
    slow, next_one = tmp_path / "slow", tmp_path / "next"
    slow.mkdir()
    next_one.mkdir()
    (slow / "member-still-exiting").touch()  # rmdir fails, as it does while members remain
    limits_module._remove_group(slow)
    assert slow.is_dir() and left == {slow}
    (slow / "member-still-exiting").unlink()  # it has exited since
    limits_module._remove_group(next_one)
    assert not slow.exists() and not next_one.exists() and not left


def test_a_kill_pass_signals_each_member_once_and_then_each_newcomer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A killed process stays listed until it has exited: signalling it again was a busy loop
    # at every close. A process forked meanwhile (a fork bomb) is still signalled.
    group = tmp_path / "group"
    group.mkdir()
    listings = iter(["11 12\n", "11 12 13\n", "11 12 13\n"])
    monkeypatch.setattr(limits_module, "_members", lambda path: [int(p) for p in next(listings).split()])
    signalled: list[int] = []
    monkeypatch.setattr(limits_module.os, "kill", lambda pid, sig: signalled.append(pid))
    limits_module._kill_members(group)
    assert signalled == [11, 12, 13]
