# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The bubblewrap sandbox: isolation, limits and hygiene, checked against real `bwrap`."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import AsyncIterator
from pathlib import Path

import psutil
import pytest
from support.loop_ticks import loop_ticks
from support.processes import alive

from nemo_gym_prorl.sandbox import SandboxError, SandboxLimits, SandboxPathError, SandboxSpec, open_sandbox
from nemo_gym_prorl.sandbox.base import Sandbox
from nemo_gym_prorl.sandbox.limits import reap_orphan_cgroups

pytestmark = pytest.mark.bwrap


@pytest.fixture
async def sandbox(tmp_path: Path) -> AsyncIterator[Sandbox]:
    sb = open_sandbox(SandboxSpec(root_dir=tmp_path))
    try:
        yield sb
    finally:
        sb.close()


async def test_runs_a_command_and_captures_both_streams(sandbox: Sandbox) -> None:
    result = await sandbox.exec("echo out; echo err >&2; exit 3")
    assert result.stdout == "out\n"
    assert result.stderr == "err\n"
    assert result.exit_code == 3
    assert not result.ok


async def test_stdin_is_delivered(sandbox: Sandbox) -> None:
    result = await sandbox.exec(["cat"], stdin=b"piped in")
    assert result.stdout == "piped in"


async def test_workspace_is_writable_and_shared_with_the_host(sandbox: Sandbox) -> None:
    result = await sandbox.exec("cd /workspace && echo data > made_inside.txt && pwd")
    assert result.stdout.strip() == "/workspace"
    assert (sandbox.workspace / "made_inside.txt").read_text() == "data\n"
    sandbox.write_file("made_outside.txt", "hello")
    assert (await sandbox.exec("cat made_outside.txt")).stdout == "hello"


async def test_host_files_outside_the_workspace_are_invisible(sandbox: Sandbox, tmp_path: Path) -> None:
    secret = tmp_path / "host-secret.txt"
    secret.write_text("do not read")
    project_file = Path(__file__).resolve()
    result = await sandbox.exec(
        f"cat {secret}; cat {project_file}; ls /home /root/.ssh; cat /etc/shadow; echo done"
    )
    assert "do not read" not in result.stdout
    assert "pytestmark" not in result.stdout
    assert result.stdout.strip().endswith("done")
    shadow = await sandbox.exec("wc -c < /etc/shadow")
    assert shadow.stdout.strip() in {"0", ""}, "the host's /etc/shadow must be masked"


async def test_system_directories_are_read_only(sandbox: Sandbox) -> None:
    result = await sandbox.exec("touch /usr/evil && echo wrote")
    assert "wrote" not in result.stdout
    assert result.exit_code != 0


async def test_tmp_is_private_to_the_sandbox_and_shared_by_its_processes(tmp_path: Path) -> None:
    with open_sandbox(SandboxSpec(root_dir=tmp_path)) as a, open_sandbox(SandboxSpec(root_dir=tmp_path)) as b:
        await a.exec("echo from-a > /tmp/note && echo from-a > /workspace/note")
        assert (await a.exec("cat /tmp/note")).stdout == "from-a\n"
        seen_by_b = await b.exec("cat /tmp/note /workspace/note; ls /tmp")
        assert "from-a" not in seen_by_b.stdout
    host_tmp_files = set(os.listdir("/tmp"))
    assert "note" not in host_tmp_files


async def test_no_network_not_even_to_the_hosts_loopback(sandbox: Sandbox) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    try:
        probe = textwrap.dedent(f"""
            import socket
            for addr in [("127.0.0.1", {port}), ("1.1.1.1", 80)]:
                try:
                    socket.create_connection(addr, timeout=2)
                    print("CONNECTED", addr)
                except OSError as exc:
                    print("blocked", addr, type(exc).__name__)
        """)
        result = await sandbox.exec(["python", "-c", probe])
        assert "CONNECTED" not in result.stdout
        assert result.stdout.count("blocked") == 2
    finally:
        server.close()


async def test_loopback_inside_the_sandbox_works(sandbox: Sandbox) -> None:
    probe = textwrap.dedent("""
        import socket, threading
        srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen()
        threading.Thread(target=lambda: srv.accept()[0].sendall(b"pong"), daemon=True).start()
        print(socket.create_connection(srv.getsockname()).recv(4).decode())
    """)
    assert (await sandbox.exec(["python", "-c", probe])).stdout.strip() == "pong"


async def test_a_command_that_never_ends_times_out_with_partial_output(sandbox: Sandbox) -> None:
    # The timeout leaves a loaded machine ample time to start the sandbox and echo; the sleep
    # outlasts it by far either way.
    started = time.monotonic()
    result = await sandbox.exec("echo started; sleep 1000", timeout=5.0)
    assert time.monotonic() - started < 60
    assert result.timed_out
    assert result.exit_code == -1
    assert result.stdout == "started\n"


async def test_output_flood_is_capped_and_memory_stays_bounded(tmp_path: Path) -> None:
    spec = SandboxSpec(root_dir=tmp_path, limits=SandboxLimits(max_output_bytes=4096))
    with open_sandbox(spec) as sb:
        rss_before = psutil.Process().memory_info().rss
        result = await sb.exec(["yes"], timeout=2.0)
        rss_after = psutil.Process().memory_info().rss
    assert result.timed_out and result.truncated
    assert result.stdout.startswith("y\ny\n")
    assert "bytes of output truncated" in result.stdout
    assert len(result.stdout) < 4096 + 200
    assert rss_after - rss_before < 50 * 1024 * 1024


async def test_binary_output_and_very_long_lines_do_not_break_capture(sandbox: Sandbox) -> None:
    result = await sandbox.exec("head -c 3000 /dev/urandom; python -c 'print(\"x\" * 400000)'")
    assert result.exit_code == 0
    assert result.truncated
    assert result.stdout.rstrip().endswith("x" * 100)


async def test_fork_bomb_is_contained_and_cleaned_up(tmp_path: Path) -> None:
    spec = SandboxSpec(root_dir=tmp_path, limits=SandboxLimits(max_processes=40))
    sb = open_sandbox(spec)
    bomb = "bomb() { bomb | bomb & }; bomb; sleep 3; echo survived"
    started = time.monotonic()
    running = asyncio.create_task(sb.exec(["bash", "-c", bomb], timeout=8))
    await asyncio.sleep(1.5)
    if sb.cgroup_path is not None:  # root: only the pids cgroup can hold it
        assert len(sb.cgroup_members()) <= 40
    # The host stays responsive: a trivial command on the host still runs promptly.
    host_probe_started = time.monotonic()
    subprocess.run(["true"], check=True)
    assert time.monotonic() - host_probe_started < 2
    result = await running
    assert time.monotonic() - started < 20
    assert "Resource temporarily unavailable" in result.stderr
    sb.close()
    if sb.cgroup_path is not None:
        assert not sb.cgroup_path.exists(), "close removes the cgroup, so none of the bomb survived"


async def test_memory_limit_is_enforced(tmp_path: Path) -> None:
    spec = SandboxSpec(root_dir=tmp_path, limits=SandboxLimits(memory_mb=256))
    with open_sandbox(spec) as sb:
        result = await sb.exec(["python", "-c", "b = bytearray(1024 * 1024 * 1024); print('allocated')"])
    assert "allocated" not in result.stdout
    assert "MemoryError" in result.stderr


async def test_file_size_limit_is_enforced(tmp_path: Path) -> None:
    spec = SandboxSpec(root_dir=tmp_path, limits=SandboxLimits(max_file_mb=1))
    with open_sandbox(spec) as sb:
        await sb.exec("head -c 5000000 /dev/zero > big.bin")
        assert (sb.workspace / "big.bin").stat().st_size <= 1024 * 1024


async def test_close_kills_what_the_sandbox_started_and_is_idempotent(tmp_path: Path) -> None:
    sb = open_sandbox(SandboxSpec(root_dir=tmp_path))
    proc = await sb.spawn(["sleep", "1000"])
    tree = [proc.pid, *(c.pid for c in psutil.Process(proc.pid).children(recursive=True))]
    sb.close()
    sb.close()
    await asyncio.wait_for(proc.wait(), 5)
    assert not any(alive(p) for p in tree)
    with pytest.raises(SandboxError, match="closed"):
        await sb.exec("true")


async def test_aclose_kills_and_reaps_while_the_loop_runs(tmp_path: Path) -> None:
    """The asynchronous close returns with every process it started reaped, so no process
    transport is left for the garbage collector to finalise after the event loop has closed."""
    sb = open_sandbox(SandboxSpec(root_dir=tmp_path))
    proc = await sb.spawn(["sleep", "1000"], stdin=True)
    await sb.aclose()
    assert sb.closed and proc.returncode is not None


async def test_hidden_dirs_are_shown_empty_and_their_files_stay_on_the_host(tmp_path: Path) -> None:
    workspace = tmp_path / "repo"
    (workspace / "r2e_tests").mkdir(parents=True)
    (workspace / "r2e_tests" / "test_1.py").write_text("assert answer == 42\n")
    spec = SandboxSpec(root_dir=tmp_path, workspace=workspace, workspace_mount="/testbed",
                       hidden_dirs=["/testbed/r2e_tests", "/usr/share"])  # fmt: skip
    async with open_sandbox(spec) as sb:
        res = await sb.exec(["/bin/sh", "-c", "ls -A /testbed/r2e_tests; ls -A /usr/share | wc -l"])
    assert res.ok and res.stdout.split() == ["0"], res  # both empty inside, /usr/share included
    assert (workspace / "r2e_tests" / "test_1.py").read_text() == "assert answer == 42\n"


def test_hidden_dirs_must_be_absolute_paths_without_parent_steps() -> None:
    for bad in ("r2e_tests", "/testbed/../etc", "/"):
        with pytest.raises(ValueError, match="hidden_dirs"):
            SandboxSpec(hidden_dirs=[bad])


async def test_close_never_touches_processes_it_did_not_start(tmp_path: Path) -> None:
    bystander = subprocess.Popen(["sleep", "1000"], start_new_session=True)
    try:
        with open_sandbox(SandboxSpec(root_dir=tmp_path)) as sb:
            await sb.spawn(["sleep", "1000"])
        assert bystander.poll() is None
    finally:
        bystander.kill()
        bystander.wait()


def test_the_sandbox_dies_with_its_parent(tmp_path: Path) -> None:
    """kill -9 of the process that opened a sandbox leaves nothing of the sandbox running."""
    parent_code = textwrap.dedent(f"""
        import asyncio, sys
        from pathlib import Path
        from nemo_gym_prorl.sandbox import SandboxSpec, open_sandbox
        async def main():
            sb = open_sandbox(SandboxSpec(root_dir=Path({str(tmp_path)!r})))
            await sb.spawn(["sh", "-c", "sleep 1000 & sleep 1000"])
            print("ready", sb.cgroup_path, flush=True)
            await asyncio.sleep(1000)
        asyncio.run(main())
    """)
    parent = subprocess.Popen([sys.executable, "-c", parent_code], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        ready, cgroup = parent.stdout.readline().split()
        assert ready == "ready"
        deadline = time.monotonic() + 10  # under load the shell may fork its sleeps late
        while True:
            descendants = [p.pid for p in psutil.Process(parent.pid).children(recursive=True)]
            if len(descendants) >= 3 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert len(descendants) >= 3, "bwrap, the sandbox's shell and its two sleeps"
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 10
        survivors = descendants
        while survivors and time.monotonic() < deadline:
            survivors = [p for p in survivors if alive(p)]
            time.sleep(0.05)
        assert survivors == [], f"sandbox processes outlived their parent: {survivors}"
        if cgroup != "None":  # the dead owner's empty cgroup is reaped by the next sandbox user:
            # this test, or another test worker's sandbox that opened meanwhile
            reaped = reap_orphan_cgroups()
            assert Path(cgroup).name in reaped or not Path(cgroup).exists()
            assert not Path(cgroup).exists()
    finally:
        if parent.poll() is None:
            parent.kill()


def test_paths_are_confined_to_the_workspace(tmp_path: Path) -> None:
    with open_sandbox(SandboxSpec(root_dir=tmp_path)) as sb:
        assert sb.host_path("/workspace/a/b.txt") == sb.workspace / "a" / "b.txt"
        assert sb.host_path("a/b.txt") == sb.workspace / "a" / "b.txt"
        (sb.workspace / "link-out").symlink_to("/etc")
        for escape in ["/etc/passwd", "../outside", "/workspace/../etc", "link-out/passwd"]:
            with pytest.raises(SandboxPathError):
                sb.host_path(escape)


def test_a_given_workspace_survives_close_a_fresh_one_does_not(tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    with open_sandbox(SandboxSpec(root_dir=tmp_path, workspace=mine)) as sb:
        sb.write_file("keep.txt", "x")
    assert (mine / "keep.txt").exists()
    with open_sandbox(SandboxSpec(root_dir=tmp_path)) as fresh:
        fresh_dir = fresh.workspace
    assert not fresh_dir.exists()


def test_rootfs_image_binds_its_top_level_entries_not_the_hosts(tmp_path: Path) -> None:
    rootfs = tmp_path / "rootfs"
    for name in ["usr/bin", "etc", "opt", "proc", "tmp"]:
        (rootfs / name).mkdir(parents=True)
    (rootfs / "usr" / "bin" / "setpriv").touch()  # what a root service drops root with
    (rootfs / "bin").symlink_to("usr/bin")
    spec = SandboxSpec(root_dir=tmp_path, image=str(rootfs), python_runtime="none")
    with open_sandbox(spec) as sb, sb.command(["true"]) as launch:
        joined = " ".join(launch.bwrap_args)
    assert f"--ro-bind {rootfs}/usr /usr" in joined
    assert f"--ro-bind {rootfs}/opt /opt" in joined
    assert "--symlink usr/bin /bin" in joined
    assert f"{rootfs}/proc" not in joined and f"{rootfs}/tmp" not in joined
    assert "/etc/shadow" not in joined, "secrets are masked only on the host root"


@pytest.mark.skipif(os.geteuid() != 0, reason="a root service's requirement")
def test_a_root_service_refuses_a_rootfs_without_setpriv(tmp_path: Path) -> None:
    rootfs = tmp_path / "rootfs"
    (rootfs / "usr" / "bin").mkdir(parents=True)
    with pytest.raises(SandboxError, match="has no setpriv"):
        open_sandbox(SandboxSpec(root_dir=tmp_path, image=str(rootfs), python_runtime="none"))
    assert [p.name for p in tmp_path.iterdir()] == ["rootfs"], "nothing left behind"


def test_an_image_that_is_not_a_directory_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(SandboxError, match="rootfs directory"):
        open_sandbox(SandboxSpec(root_dir=tmp_path, image=str(tmp_path / "nope.sif")))


async def test_network_can_be_enabled_explicitly(tmp_path: Path) -> None:
    probe = "cat /proc/net/dev | grep -c ':'"  # interfaces: loopback alone in a network namespace
    with open(Path("/proc/net/dev")) as host:
        host_interfaces = sum(":" in line for line in host)
    with open_sandbox(SandboxSpec(root_dir=tmp_path, network=True)) as sb:
        assert int((await sb.exec(probe)).stdout) == host_interfaces
    with open_sandbox(SandboxSpec(root_dir=tmp_path)) as sb:
        assert int((await sb.exec(probe)).stdout) == 1


async def test_read_only_binds_under_the_hosts_tmp_stay_visible(tmp_path: Path) -> None:
    """A checkout (and its venv) under /tmp, as in CI, must not be hidden by the sandbox's /tmp."""
    shared = tmp_path / "runtime"
    shared.mkdir()
    (shared / "tool.txt").write_text("visible\n")
    with open_sandbox(SandboxSpec(root_dir=tmp_path, ro_binds=[shared])) as sb:
        result = await sb.exec(f"cat {shared}/tool.txt; touch {shared}/x 2>/dev/null || echo read-only")
    assert result.stdout.split() == ["visible", "read-only"]


async def test_sys_executable_runs_inside_even_through_a_symlinked_venv(tmp_path: Path) -> None:
    """Trusted graders (python_runtime="project") run `sys.executable`; NeMo Gym reaches our
    venv through a symlink."""
    with open_sandbox(SandboxSpec(root_dir=tmp_path, python_runtime="project")) as sb:
        result = await sb.exec([sys.executable, "-c", "import ipykernel, sys; print(sys.prefix)"])
    assert result.exit_code == 0, result.stderr


async def test_a_cancelled_exec_leaves_nothing_running(tmp_path: Path) -> None:
    async with open_sandbox(SandboxSpec(root_dir=tmp_path)) as sb:
        task = asyncio.ensure_future(sb.exec("sleep 41 & sleep 42; echo never"))
        await asyncio.sleep(0.5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        left = await sb.exec("ps -eo args | grep -c '^sleep 4[12]' || true")
        assert left.stdout.strip() == "0", "a cancelled command kept running"


async def test_closing_a_sandbox_never_stalls_the_event_loop(tmp_path: Path) -> None:
    """What a close waits on (a terminal's close, the cgroup's removal, the tree) runs in a thread:
    the loop goes on serving other rollouts meanwhile."""
    sb = open_sandbox(SandboxSpec(root_dir=tmp_path))
    await sb.spawn_pty(["/bin/sh", "-c", "sleep 100"])  # a terminal's close waits for its exit status
    async with loop_ticks() as ticks:
        await sb.aclose()
    during = ticks.count
    assert sb.closed and during > 10, f"the loop ran {during} times while the sandbox closed"
