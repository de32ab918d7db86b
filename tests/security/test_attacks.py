# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Attacks from inside RUN sandboxes, each contained, while a real service keeps serving.

A real `prorl serve` (own process, real port, API token) runs sandboxed rollouts for the whole
module; the attacks run in sandboxes opened with the same default spec on the same host, and
through the agent's tools (PTY shell, editor, upload/download). The last test checks that every
neighbouring rollout completed normally and that the service stayed healthy. Each test records
its figure in the ledger printed at the end of the session (conftest.py).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from conftest import Ledger, Service, process_limit_mechanism
from support.processes import alive

from nemo_gym_prorl.sandbox import SandboxError, SandboxLimits, SandboxSpec, open_sandbox
from nemo_gym_prorl.sandbox.base import Sandbox
from nemo_gym_prorl.sandbox.runtime import installed_runtime
from nemo_gym_prorl.tools.editor import Editor, EditorError
from nemo_gym_prorl.tools.pty_shell import PtyShell

pytestmark = pytest.mark.bwrap

NEIGHBOURS = 6


@pytest.fixture(scope="module")
def neighbours(service: Service) -> list[str]:
    """Rollouts of other 'users' of the service, running while the attacks do."""
    jobs = [{"task": "box", "instance": {"script": {"run_s": 20, "turns": 10}}} for _ in range(NEIGHBOURS)]
    with service.client() as http:
        response = http.post("/v1/rollouts", json={"jobs": jobs})
        assert response.status_code == 202, response.text
        return list(response.json()["ids"])


def sandbox(tmp_path: Path, **limits: Any) -> Sandbox:
    return open_sandbox(SandboxSpec(root_dir=tmp_path, limits=SandboxLimits(**limits)))


def host_processes_matching(marker: str) -> list[int]:
    out = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if any(marker in part for part in proc.info["cmdline"] or []):
                out.append(proc.pid)
        except psutil.Error:
            pass
    return [p for p in out if alive(p)]


@pytest.fixture
def host_sleeper() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


async def test_fork_bomb_is_contained_and_neighbours_keep_running(
    tmp_path: Path, ledger: Ledger, neighbours: list[str]
) -> None:
    assert neighbours
    mechanism = process_limit_mechanism()
    assert mechanism != "none", "no process limit binds here: the sandbox must have refused to start"
    with sandbox(tmp_path / "bomb", max_processes=64) as bomb, sandbox(tmp_path / "other") as other:
        marker = f"bomb-{os.urandom(4).hex()}"
        # Every process forks forever and never exits: the population sits at whatever limit binds.
        bomb_code = f"import os, time  # {marker}\nwhile True:\n    try: os.fork()\n    except OSError: time.sleep(0.01)"
        run = asyncio.ensure_future(bomb.exec([bomb.python, "-c", bomb_code], timeout=6))
        peak, probes = 0, []

        async def watch() -> None:
            nonlocal peak
            while not run.done():
                # Its cgroup's members, or (rlimit only) host processes carrying its command line.
                members = bomb.cgroup_members() if bomb.cgroup_path else host_processes_matching(marker)
                peak = max(peak, len(members))
                await asyncio.sleep(0.02)

        async def neighbour() -> None:
            while not run.done():
                echo = await other.exec(["echo", "alive"], timeout=20)
                probes.append(echo.stdout.strip() == "alive")
                await asyncio.sleep(0.1)

        await asyncio.gather(watch(), neighbour(), run)
        bombed = run.result()
    left = len(host_processes_matching(marker))
    contained = bombed.timed_out and 16 <= peak <= 64 and all(probes) and left == 0
    ledger.record(
        "fork bomb",
        contained,
        f"peak {peak} processes (limit 64, {mechanism}); a neighbour sandbox answered "
        f"{sum(probes)}/{len(probes)} commands during it; {left} left after close",
    )
    assert all(probes) and probes, "a neighbour sandbox must keep working during a fork bomb"
    assert bombed.timed_out and 16 <= peak <= 64 and left == 0, (
        peak,
        left,
        bombed.stderr[-300:],
    )


async def test_memory_hog_is_refused(tmp_path: Path, ledger: Ledger) -> None:
    with sandbox(tmp_path, memory_mb=256) as sb:
        result = await sb.exec([sb.python, "-c", "b = bytearray(1 << 30); print('allocated')"], timeout=60)
    contained = "allocated" not in result.stdout and "MemoryError" in result.stderr
    ledger.record(
        "memory hog", contained, "1 GiB allocation -> MemoryError under a 256 MiB address-space limit"
    )
    assert contained, (result.stdout, result.stderr[-500:])


async def test_disk_fill_stops_at_the_file_size_limit(tmp_path: Path, ledger: Ledger) -> None:
    with sandbox(tmp_path, max_file_mb=8) as sb:
        result = await sb.exec("head -c 100M /dev/zero > big.bin; echo exit=$?", timeout=60)
        size = (sb.workspace / "big.bin").stat().st_size
    contained = size <= 8 * 1024 * 1024
    ledger.record(
        "disk fill (one file)", contained, f"100 MiB write stopped at {size / 2**20:.1f} MiB (limit 8 MiB)"
    )
    assert contained and result.stdout.strip() != "exit=0"


async def test_output_flood_is_capped(tmp_path: Path, ledger: Ledger) -> None:
    rss_before = psutil.Process().memory_info().rss
    with sandbox(tmp_path, max_output_bytes=64 * 1024) as sb:
        result = await sb.exec(["yes", "flood"], timeout=3)
    grown = (psutil.Process().memory_info().rss - rss_before) / 2**20
    captured = len(result.stdout) + len(result.stderr)
    contained = result.truncated and captured <= 2 * 64 * 1024 + 1024 and grown < 64
    ledger.record(
        "output flood",
        contained,
        f"3 s of `yes`: {captured / 1024:.0f} KiB kept (cap 64 KiB), host RSS +{grown:.0f} MiB",
    )
    assert contained, (captured, grown)


async def test_infinite_loop_is_stopped_at_its_timeout(tmp_path: Path, ledger: Ledger) -> None:
    with sandbox(tmp_path) as sb:
        result = await sb.exec([sb.python, "-c", "while True: pass"], timeout=2)
        # A killed process leaves the cgroup once it is reaped: allow a loaded machine a moment.
        deadline = time.monotonic() + 5
        while (left := len(sb.cgroup_members())) and time.monotonic() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(0.1)
    contained = result.timed_out and left == 0
    ledger.record(
        "infinite loop",
        contained,
        f"killed at its 2 s timeout after {result.duration_s:.1f} s; {left} processes left",
    )
    assert contained, (result.timed_out, result.duration_s, left)


async def test_sleeping_children_do_not_outlive_the_sandbox(tmp_path: Path, ledger: Ledger) -> None:
    marker = f"{int.from_bytes(os.urandom(2), 'big'):05d}"  # sleep lengths stay < 1e7 s
    sb = sandbox(tmp_path)
    shell = PtyShell(sb, timeout=30)
    await shell.start()
    await shell.run(
        f"(sleep 9{marker}1 &); setsid sleep 9{marker}2 & nohup sleep 9{marker}3 >/dev/null 2>&1 & disown; "
        f"{sb.python} -c 'import os,time; os.fork() or os.setsid(); time.sleep(9{marker}4)' & echo started"
    )
    deadline = time.monotonic() + 15
    while len(before := host_processes_matching(f"9{marker}")) < 5 and time.monotonic() < deadline:
        time.sleep(0.1)  # the double-forking Python needs a moment to start under load
    shell.close()
    sb.close()
    deadline = time.monotonic() + 10
    while host_processes_matching(f"9{marker}") and time.monotonic() < deadline:
        time.sleep(0.05)  # the processes are not ours to wait on: poll the host's process table
    after = host_processes_matching(f"9{marker}")
    ledger.record(
        "sleeping children left behind",
        not after,
        f"{len(before)} detached sleepers (subshell, setsid, nohup, double fork) alive; {len(after)} after close",
    )
    assert len(before) >= 5 and not after, (before, after)


NET_PROBE = r"""
import json, socket, sys
port = int(sys.argv[1])
out = {}
def attempt(name, fn):
    try:
        fn(); out[name] = "SUCCEEDED"
    except Exception as exc:
        out[name] = type(exc).__name__
def tcp(host, p):
    s = socket.create_connection((host, p), timeout=2); s.close()
def udp_dns():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(2)
    s.sendto(bytes.fromhex("abcd010000010000000000000370797069036f72670000010001"), ("8.8.8.8", 53))
    s.recvfrom(512)
attempt("tcp 1.1.1.1:443", lambda: tcp("1.1.1.1", 443))
attempt("tcp pypi.org:443", lambda: tcp("pypi.org", 443))
attempt("udp dns 8.8.8.8:53", udp_dns)
attempt("dns getaddrinfo", lambda: socket.getaddrinfo("pypi.org", 443))
attempt("tcp service 127.0.0.1", lambda: tcp("127.0.0.1", port))
attempt("tcp service localhost", lambda: tcp("localhost", port))
print(json.dumps(out))
"""


async def test_network_is_unreachable_including_the_services_port(
    tmp_path: Path, ledger: Ledger, service: Service
) -> None:
    with service.client() as http:
        assert http.get("/healthz").status_code == 200, "the service listens on the host's loopback"
    with sandbox(tmp_path) as sb:
        result = await sb.exec([sb.python, "-c", NET_PROBE, str(service.port)], timeout=60)
    outcomes = json.loads(result.stdout)
    reached = [k for k, v in outcomes.items() if v == "SUCCEEDED"]
    ledger.record(
        "network (TCP, UDP, DNS, service port)",
        not reached,
        f"{len(outcomes) - len(reached)}/{len(outcomes)} attempts failed: "
        + ", ".join(f"{k}={v}" for k, v in outcomes.items()),
    )
    assert not reached, outcomes


async def test_host_files_other_sandboxes_and_the_token_are_unreadable(
    tmp_path: Path, ledger: Ledger, service: Service
) -> None:
    secret = "host-secret-" + os.urandom(6).hex()
    host_tmp = Path(tempfile.gettempdir()) / f"prorl-host-file-{os.getpid()}.txt"
    host_tmp.write_text(secret)
    home_file = Path.home() / f".prorl-home-secret-{os.getpid()}"
    home_file.write_text(secret)
    try:
        with sandbox(tmp_path / "a") as attacker, sandbox(tmp_path / "b") as victim:
            victim.write_file("answer.txt", secret)
            targets = [str(host_tmp), str(home_file), str(victim.workspace / "answer.txt"), "/root/.bashrc",
                       "/etc/shadow", f"/proc/{service.process.pid}/environ", "/proc/1/environ"]  # fmt: skip
            script = (
                "for f in " + " ".join(targets) + '; do cat "$f" 2>/dev/null; done; '
                "ls -a /home /root 2>/dev/null; cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n'; env; "
                f"grep -rs {secret} /tmp /workspace /opt /etc /var /home /root 2>/dev/null"
            )
            result = await attacker.exec(script, timeout=60)
    finally:
        host_tmp.unlink()
        home_file.unlink()
    leaked = [s for s in (secret, service.token) if s in result.stdout + result.stderr]
    ledger.record(
        "read host files, other sandboxes, the service's token",
        not leaked,
        f"{len(targets)} paths (host temp dir, home, another sandbox's workspace, /root, the service's "
        f"/proc environ) + a grep of every visible directory: {len(leaked)} secrets read",
    )
    assert not leaked


async def test_writes_outside_the_workspace_do_not_reach_the_host(tmp_path: Path, ledger: Ledger) -> None:
    host_dir = Path(tempfile.mkdtemp(prefix="prorl-host-dir-"))
    runtime = installed_runtime().host_dir
    name = f"prorl-evil-{os.getpid()}"
    inside = ["/usr", "/etc", "/opt/prorl-runtime", "/bin", str(host_dir), str(runtime), "/root", "/"]
    on_host = [Path(d) / name for d in ["/usr", "/etc", "/bin", str(host_dir), str(runtime), "/root", "/"]]
    try:
        with sandbox(tmp_path) as sb:
            await sb.exec("for d in " + " ".join(inside) + f"; do touch $d/{name}; done", timeout=30)
        written = [str(p) for p in on_host if p.exists()]
    finally:
        for path in on_host:
            if path.exists():
                path.unlink()
        host_dir.rmdir()
    ledger.record(
        "write outside the workspace",
        not written,
        f"{len(inside)} targets tried; {len(written)} reached the host",
    )
    assert not written, written


PTRACE = r"""
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
for pid in map(int, sys.argv[1:]):
    rc = libc.ptrace(16, pid, 0, 0)  # PTRACE_ATTACH
    print(pid, rc, ctypes.get_errno())
"""


async def test_host_processes_cannot_be_signalled_or_traced(
    tmp_path: Path, ledger: Ledger, host_sleeper: subprocess.Popen[bytes], service: Service
) -> None:
    targets = [host_sleeper.pid, service.process.pid, os.getpid()]
    with sandbox(tmp_path) as sb:
        kill = " ".join(f"kill -9 {p} 2>/dev/null;" for p in targets)
        await sb.exec(
            f"{sb.python} -c '{PTRACE}' {' '.join(map(str, targets))}; {kill} kill -9 -1", timeout=30
        )
        traced = await sb.exec([sb.python, "-c", PTRACE, *map(str, targets)], timeout=30)
    attached = [line for line in traced.stdout.splitlines() if line.split()[1:2] == ["0"]]
    survivors = [alive(p) for p in targets]
    ledger.record(
        "signal / ptrace host processes",
        all(survivors) and not attached,
        f"kill -9 and PTRACE_ATTACH on {len(targets)} host pids (a sleeper, the service, the test runner): "
        f"{sum(survivors)}/{len(targets)} alive, {len(attached)} attached",
    )
    assert all(survivors) and not attached, (survivors, traced.stdout)


async def test_symlink_and_dotdot_escapes_through_the_editor_and_file_transfer(
    tmp_path: Path, ledger: Ledger
) -> None:
    host_dir = Path(tempfile.mkdtemp(prefix="prorl-host-dir-"))
    (host_dir / "host.txt").write_text("host secret")
    refused, tried = 0, 0
    try:
        with sandbox(tmp_path) as sb:
            await sb.exec(
                f"ln -s {host_dir} hostdir; ln -s /etc/hostname hn; ln -s {host_dir}/host.txt hf", timeout=30
            )
            editor = Editor(sb)
            attempts = [
                lambda: editor.view("../../etc/passwd"),
                lambda: editor.view("/workspace/../etc/passwd"),
                lambda: editor.view("/workspace/hf"),
                lambda: editor.view("/workspace/hostdir/host.txt"),
                lambda: editor.create("/workspace/hostdir/evil.txt", "x"),
                lambda: editor.str_replace("/workspace/hf", "host", "evil"),
                lambda: sb.write_file("../escape.txt", "x"),
                lambda: sb.write_file("hostdir/evil.txt", "x"),
                lambda: sb.read_file("hf"),
                lambda: sb.read_file("hostdir/host.txt"),
                lambda: sb.read_file("../../../etc/passwd"),
            ]
            for attempt in attempts:
                tried += 1
                try:
                    attempt()
                except (EditorError, SandboxError, OSError):
                    refused += 1
            # A race: the policy swaps a directory for a symlink to the host while files are uploaded.
            swap = await sb.spawn(
                ["/bin/sh", "-c", f"while :; do rm -rf d; mkdir d; rm -rf d; ln -s {host_dir} d; done"]
            )
            uploads = 0
            deadline = time.monotonic() + 2
            while time.monotonic() < deadline:
                for _ in range(50):
                    try:
                        sb.write_file("d/race.txt", "x")
                        uploads += 1
                    except (SandboxError, OSError):
                        pass
                await asyncio.sleep(0)
            sb.kill_process(swap)
        escaped = [p.name for p in host_dir.iterdir() if p.name != "host.txt"]
        intact = (host_dir / "host.txt").read_text() == "host secret"
    finally:
        for p in host_dir.iterdir():
            p.unlink()
        host_dir.rmdir()
    contained = refused == tried and not escaped and intact
    ledger.record(
        "symlink and ../ escapes (editor, upload, download)",
        contained,
        f"{refused}/{tried} escapes refused; symlink-swap race: {uploads} uploads landed inside, "
        f"{len(escaped)} outside",
    )
    assert contained, (refused, tried, escaped)


def test_without_a_binding_process_limit_a_sandbox_refuses_to_start(
    tmp_path: Path, ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As root where no pids cgroup is writable (many containers): refuse, unless waived."""
    import nemo_gym_prorl.sandbox.limits as limits

    monkeypatch.setattr(limits, "_pids_parent", lambda: None)
    monkeypatch.setattr(limits.os, "geteuid", lambda: 0)
    with pytest.raises(SandboxError, match="accept_no_process_limit"):
        open_sandbox(SandboxSpec(root_dir=tmp_path))
    with open_sandbox(SandboxSpec(root_dir=tmp_path, limits=SandboxLimits(accept_no_process_limit=True))):
        pass
    ledger.record(
        "root without a process limit", True, "sandbox refused to start unless accept_no_process_limit=true"
    )


def test_neighbouring_rollouts_completed_and_the_service_stayed_healthy(
    service: Service, neighbours: list[str], ledger: Ledger
) -> None:
    with service.client() as http:
        more = http.post("/v1/rollouts", json={"jobs": [{"task": "box", "instance": {}}] * 2}).json()["ids"]
        body = {"ids": [*neighbours, *more], "timeout_s": 120, "mode": "all"}
        http.post("/v1/rollouts/wait", json=body, timeout=180)
        results = [http.get(f"/v1/rollouts/{i}").json() for i in [*neighbours, *more]]
        health = http.get("/healthz").status_code
        unauthenticated = http.get("/v1/status", headers={"Authorization": ""}).status_code
    done = [r for r in results if r["state"] == "done" and (r.get("reward") or 0) == 1.0]
    ledger.figures["neighbour rollouts"] = (
        f"{len(done)}/{len(results)} completed with reward 1.0 ({len(neighbours)} during the attacks, "
        f"{len(more)} after); /healthz {health}; unauthenticated /v1/status {unauthenticated}"
    )
    ledger.figures["process limit mechanism"] = process_limit_mechanism()
    assert service.process.poll() is None, "the service is still running"
    assert len(done) == len(results), [(r["state"], r.get("reward"), r.get("error")) for r in results]
    assert health == 200 and unauthenticated == 401
