# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The `bubblewrap` provider keeps NeMo Gym's sandbox contract, on real bubblewrap.

Found by name through Gym's registry; commands, files, status and close as Gym's facade uses
them; background processes live until close and not a moment after; timeouts in Gym's shape;
no network and no host files; what it cannot honour is refused, saying why; terminals work."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from nemo_gym.sandbox import AsyncSandbox
from nemo_gym.sandbox.providers.base import SandboxCreateError, SandboxPtySpec, SandboxSpec, SandboxStatus
from nemo_gym.sandbox.providers.registry import create_provider, get_provider_class

from nemo_gym_prorl.integrations.gym.sandbox_provider import BubblewrapProvider
from nemo_gym_prorl.sandbox import limits
from nemo_gym_prorl.sandbox.limits import writable_controllers

pytestmark = pytest.mark.bwrap


@pytest.fixture
async def provider(tmp_path: Path) -> AsyncIterator[BubblewrapProvider]:
    made = create_provider({"bubblewrap": {"root_dir": str(tmp_path / "boxes")}})
    assert isinstance(made, BubblewrapProvider)
    yield made
    await made.aclose()


@pytest.fixture
async def sandbox(provider: BubblewrapProvider) -> AsyncIterator[AsyncSandbox]:
    box = AsyncSandbox(provider, SandboxSpec(workdir="/work", env={"GREETING": "hi"}), owns_provider=False)
    await box.start()
    yield box
    await box.stop()


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def test_gym_finds_it_by_name_through_the_entry_point() -> None:
    assert get_provider_class("bubblewrap") is BubblewrapProvider


async def test_exec_upload_download_status_and_close(sandbox: AsyncSandbox, tmp_path: Path) -> None:
    result = await sandbox.exec("echo $GREETING from $(pwd); echo oops >&2; exit 3")
    assert (result.stdout, result.stderr, result.return_code, result.error_type) == (
        "hi from /work\n", "oops\n", 3, None,
    )  # fmt: skip
    source = tmp_path / "in.bin"
    source.write_bytes(bytes(range(256)))
    await sandbox.upload(source, "data/in.bin")  # relative: under the workdir
    await sandbox.upload(source, "/tmp/copy.bin")
    checked = await sandbox.exec("cmp data/in.bin /tmp/copy.bin && wc -c < /work/data/in.bin")
    assert checked.stdout.strip() == "256"
    await sandbox.exec("printf made-inside > /tmp/out.txt")
    await sandbox.download("/tmp/out.txt", tmp_path / "out.txt")
    assert (tmp_path / "out.txt").read_text() == "made-inside"
    await sandbox.download("/etc/os-release", tmp_path / "os-release")  # the read-only system view
    assert (tmp_path / "os-release").read_bytes() == Path("/etc/os-release").read_bytes()
    assert await sandbox.status() == SandboxStatus.RUNNING
    await sandbox.stop()
    assert await sandbox.status() == SandboxStatus.STOPPED


async def test_spec_files_env_and_the_one_unprivileged_user(provider: BubblewrapProvider) -> None:
    handle = await provider.create(SandboxSpec(files={"app/main.py": "print(6 * 7)"}, env={"X": "1"}))
    try:
        result = await provider.exec(handle, "python3 app/main.py; echo $X; id -u")
        uid = result.stdout.split()[2]
        assert result.stdout.split()[:2] == ["42", "1"] and uid != "0"
        for named in (int(uid), "root", 0):  # Gym's agents ask for root: they get the one user
            assert (await provider.exec(handle, "id -u", user=named)).stdout.strip() == uid
        with pytest.raises(ValueError, match="no other user exists there"):
            await provider.exec(handle, "true", user="nobody")
    finally:
        await provider.close(handle)


async def test_a_setsid_daemon_outlives_its_exec_and_dies_at_close(provider: BubblewrapProvider) -> None:
    handle = await provider.create(SandboxSpec())
    started = await provider.exec(handle, "setsid sleep 300 >/dev/null 2>&1 </dev/null & echo started")
    assert started.stdout == "started\n"
    await asyncio.sleep(0.2)
    listing = await provider.exec(handle, "ps -eo args")
    assert "sleep 300" in listing.stdout  # a later exec sees it: same pid namespace, still running
    daemons = [pid for pid in handle.raw.sandbox.cgroup_members() if "sleep\x00300" in _cmdline(pid)]
    assert daemons, "the daemon is a host process of this sandbox"
    await provider.close(handle)
    await asyncio.sleep(0.1)
    assert not any(_alive(pid) for pid in daemons)
    assert handle.raw.sandbox.cgroup_members() == []


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_text()
    except OSError:
        return ""


async def test_a_daemon_serves_later_execs_over_loopback(provider: BubblewrapProvider) -> None:
    handle = await provider.create(SandboxSpec())
    try:
        await provider.exec(handle, "setsid python3 -m http.server 8765 >/dev/null 2>&1 </dev/null &")
        fetch = "python3 -c \"import urllib.request as u; print(u.urlopen('http://127.0.0.1:8765/').status)\""
        for _ in range(50):
            result = await provider.exec(handle, fetch)
            if result.return_code == 0:
                break
            await asyncio.sleep(0.1)
        assert result.stdout.strip() == "200"
    finally:
        await provider.close(handle)


async def test_timeout_has_gyms_shape_and_kills_the_command(provider: BubblewrapProvider) -> None:
    handle = await provider.create(SandboxSpec())
    try:
        result = await provider.exec(handle, "echo begun; sleep 30", timeout_s=0.5)
        assert (result.return_code, result.error_type) == (125, "timeout")
        assert "timed out after 0.5s" in result.stderr
        assert "sleep 30" not in (await provider.exec(handle, "ps -eo args")).stdout
    finally:
        await provider.close(handle)


async def test_network_is_off(sandbox: AsyncSandbox) -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        probe = (
            'python3 -c "import socket; s = socket.socket(); s.settimeout(2); '
            f"print(s.connect_ex(('127.0.0.1', {port})))\""
        )
        result = await sandbox.exec(probe)
    assert int(result.stdout) != 0  # refused: the sandbox's loopback is its own, the host's is not there


async def test_host_files_outside_are_neither_visible_nor_writable(
    sandbox: AsyncSandbox, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("host only")
    result = await sandbox.exec(f"cat {secret}; ls {tmp_path}; touch /usr/pwned; echo x > /etc/pwned")
    assert result.return_code != 0 and "host only" not in result.stdout
    assert not Path("/usr/pwned").exists() and not Path("/etc/pwned").exists()
    caps = await sandbox.exec("grep CapEff /proc/self/status; mount -o remount,rw /usr")
    assert "CapEff:\t0000000000000000" in caps.stdout and caps.return_code != 0


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (SandboxSpec(image="docker.io/library/python:3.12-slim"), "pulls no container images"),
        (SandboxSpec(resources={"gpu": 1}), "no GPU"),
        (SandboxSpec(ports=[8080]), "no network"),
        (SandboxSpec(workdir="/usr/app"), "outside the system directories"),
        (SandboxSpec(provider_options={"privileged": True}), "unknown bubblewrap provider_options"),
        (SandboxSpec(provider_options={"platform": {"os": "windows"}}), "runs on this host only"),
    ],
)
async def test_what_it_cannot_honour_is_refused(
    provider: BubblewrapProvider, spec: SandboxSpec, message: str
) -> None:
    with pytest.raises(SandboxCreateError, match=message):
        await provider.create(spec)


def test_network_and_strict_resources_are_provider_options() -> None:
    with pytest.raises(ValueError, match="only supports 'none'"):
        BubblewrapProvider(network="pypi.org")
    with pytest.raises(ValueError, match="'host' or an absolute rootfs"):
        BubblewrapProvider(images={"python:3.12-slim": "relative/dir"})


@pytest.fixture
def no_writable_cgroups(monkeypatch: pytest.MonkeyPatch) -> None:
    """A machine where no cgroup controller can be written (an unprivileged user on a cluster)."""
    monkeypatch.setattr(limits, "_controller_parent", lambda controller: None)


@pytest.mark.usefixtures("no_writable_cgroups")
async def test_what_this_machine_cannot_enforce_is_reported_with_the_reason(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    provider = BubblewrapProvider(root_dir=str(tmp_path), limits={"accept_no_process_limit": True})
    with caplog.at_level(logging.WARNING):
        handle = await provider.create(SandboxSpec(resources={"memory_mib": 512, "cpu": 1, "disk_gib": 2}))
    try:
        memory, cpu, disk = handle.raw.unenforced
        assert memory.startswith("memory_mib=512: no writable memory cgroup") and "RLIMIT_AS" in memory
        assert cpu.startswith("cpu=1: no writable cpu cgroup")
        assert disk.startswith("disk_gib=2: bubblewrap has no disk quota")
        for entry in handle.raw.unenforced:  # the log says which and why, too
            assert f"resources.{entry}" in caplog.text
        limits_used = handle.raw.sandbox.spec.limits
        assert (limits_used.sandbox_memory_mb, limits_used.cpus) == (None, None)
        # What still applies: each process's address space and file size.
        result = await provider.exec(handle, "ulimit -v; ulimit -f")
        assert result.stdout.split() == [str(512 * 1024), str(2 << 20)]  # KiB, as bash counts both
    finally:
        await provider.aclose()


@pytest.mark.usefixtures("no_writable_cgroups")
async def test_unenforced_requests_are_refused_when_asked_to_be_strict(tmp_path: Path) -> None:
    strict = BubblewrapProvider(unenforced_resources="refuse", root_dir=str(tmp_path))
    with pytest.raises(SandboxCreateError, match=r"resources\.cpu=2: no writable cpu cgroup.*refuse"):
        await strict.create(SandboxSpec(resources={"cpu": 2}))
    with pytest.raises(SandboxCreateError, match=r"resources\.memory_mib=64: no writable memory cgroup"):
        await strict.create(SandboxSpec(resources={"memory_mib": 64}))


async def test_a_disk_request_is_never_reported_as_enforced(tmp_path: Path) -> None:
    strict = BubblewrapProvider(unenforced_resources="refuse", root_dir=str(tmp_path))
    with pytest.raises(SandboxCreateError, match="no disk quota"):
        await strict.create(SandboxSpec(resources={"disk_gib": 1}))


async def test_an_image_name_maps_to_the_host_system_and_resources_to_limits(tmp_path: Path) -> None:
    mapped = BubblewrapProvider(images={"python:3.12-slim": "host"}, root_dir=str(tmp_path))
    handle = await mapped.create(
        SandboxSpec(image="python:3.12-slim", resources={"memory_mib": 512, "cpu": 1})
    )
    try:
        result = await mapped.exec(handle, "ulimit -v; python3 -c 'print(1)'")
        assert result.stdout.split() == [str(512 * 1024), "1"]
        controllers = writable_controllers()
        limits_used = handle.raw.sandbox.spec.limits
        assert limits_used.sandbox_memory_mb == (512 if "memory" in controllers else None)
        assert limits_used.cpus == (1 if "cpu" in controllers else None)
        reported = [entry.split("=", 1)[0] for entry in handle.raw.unenforced]
        assert reported == [
            name for name, c in (("memory_mib", "memory"), ("cpu", "cpu")) if c not in controllers
        ]
    finally:
        await mapped.aclose()


@pytest.mark.skipif("memory" not in writable_controllers(), reason="no writable memory cgroup here")
async def test_memory_mib_bounds_the_sandbox_as_a_whole(tmp_path: Path) -> None:
    provider = BubblewrapProvider(root_dir=str(tmp_path))
    handle = await provider.create(SandboxSpec(resources={"memory_mib": 300}))
    # The first holds its 200 MiB until the second has taken its own: load cannot stagger them apart.
    holder = (
        'python3 -c \'import os, time; b = bytearray(200 << 20); open("ready", "w").close()\n'
        'while not os.path.exists("taken"): time.sleep(0.05)\' & first=$!; '
        "while [ ! -e ready ] && kill -0 $first 2>/dev/null; do sleep 0.05; done; "
    )
    taker = "python3 -c 'b = bytearray(200 << 20)'"
    try:
        alone = await provider.exec(handle, taker)
        assert alone.return_code == 0, alone.stderr  # 200 MiB is under the limit for one process
        # Two at once, 400 MiB together: the kernel kills one of them.
        both = await provider.exec(
            handle, f"{holder}{taker}; second=$?; touch taken; wait $first; echo $? $second"
        )
        assert "137" in both.stdout.split(), both
    finally:
        await provider.aclose()


async def test_ttl_closes_the_sandbox(tmp_path: Path) -> None:
    provider = BubblewrapProvider(root_dir=str(tmp_path))
    handle = await provider.create(SandboxSpec(ttl_s=0.3))
    await asyncio.sleep(0.8)
    assert await provider.status(handle) == SandboxStatus.STOPPED
    with pytest.raises(RuntimeError, match="ttl_s"):
        await provider.exec(handle, "true")
    await provider.close(handle)


async def test_pty_session(sandbox: AsyncSandbox) -> None:
    session = await sandbox.pty.create()
    async with session:
        await session.write(b"stty -echo; echo $((6*7)); tty\n")
        seen = b""
        while b"42" not in seen:
            seen += await session.read(timeout_s=5)
        await session.write(b"exit 5\n")
        assert await session.wait_exit(timeout_s=5) == 5
    result = await sandbox.pty.exec("echo piped; echo err >&2", pty=False, timeout_s=10)
    assert (result.stdout, result.stderr, result.return_code) == ("piped\n", "err\n", 0)


async def test_nothing_is_left_running_after_close(tmp_path: Path) -> None:
    provider = BubblewrapProvider(root_dir=str(tmp_path))
    handle = await provider.create(SandboxSpec())
    await provider.exec(handle, "for i in 1 2 3; do setsid sleep 300 </dev/null >/dev/null 2>&1 & done")
    session = await provider.create_pty(handle, SandboxPtySpec())
    members = handle.raw.sandbox.cgroup_members()
    assert len(members) >= 5
    await provider.aclose()  # closes sandboxes still open, and their terminals
    await asyncio.sleep(0.1)
    assert session.closed and not any(_alive(pid) for pid in members)
    assert not any(os.scandir(tmp_path))  # the sandbox's directories are gone too


# -- connect: another process borrows a live sandbox (Gym's ConnectableProvider) -----------------

# A Gym borrower in another process: the provider from Gym's registry, `AsyncSandbox.connect`
# with the descriptor, one command, then `disconnect()` (what Gym's sandboxed agents do).
_BORROWER = """
import asyncio, json, sys
from nemo_gym.sandbox import AsyncSandbox
from nemo_gym.sandbox.providers.registry import create_provider

async def main():
    provider = create_provider({"bubblewrap": {"root_dir": sys.argv[2]}})
    box = await AsyncSandbox.connect(json.loads(sys.argv[1]), provider=provider)
    result = await box.exec(sys.argv[3])
    print(json.dumps({"out": result.stdout, "err": result.stderr, "code": result.return_code}))
    await box.disconnect()

asyncio.run(main())
"""


def _borrow(descriptor: dict[str, object], root: Path, command: str) -> dict[str, object]:
    import json
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", _BORROWER, json.dumps(descriptor), str(root), command],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


async def test_is_connectable(provider: BubblewrapProvider) -> None:
    from nemo_gym.sandbox.providers.base import ConnectableProvider

    assert isinstance(provider, ConnectableProvider)


async def test_another_process_connects_to_the_same_live_sandbox(
    sandbox: AsyncSandbox, tmp_path: Path
) -> None:
    await sandbox.exec(
        "echo from-owner > note.txt; echo t > /tmp/t.txt; setsid sleep 311 >/dev/null 2>&1 </dev/null &"
    )
    descriptor = await sandbox.serialize()
    assert descriptor["workdir"] == "/work" and descriptor["provider"] == "bubblewrap"
    seen = _borrow(
        descriptor, tmp_path / "borrower",
        "cat note.txt /tmp/t.txt; pwd; ps -eo args | grep -c '^sleep 311'; echo borrowed > back.txt; "
        "setsid sleep 312 >/dev/null 2>&1 </dev/null &",
    )  # fmt: skip
    assert seen["code"] == 0 and str(seen["out"]).split() == ["from-owner", "t", "/work", "1"]
    # The borrower has disconnected and exited: its file and the daemon it detached remain.
    after = await sandbox.exec("cat back.txt; ps -eo args | grep -c '^sleep 31[12]'")
    # All of the answer on failure: an empty stdout once in CI said nothing of why.
    assert after.stdout.split() == ["borrowed", "2"], (after.return_code, after.stdout, after.stderr)
    assert await sandbox.status() == SandboxStatus.RUNNING


async def test_a_borrowed_close_releases_and_the_owners_close_ends_it(tmp_path: Path) -> None:
    owner = BubblewrapProvider(root_dir=str(tmp_path / "owner"))
    borrower = BubblewrapProvider(root_dir=str(tmp_path / "borrower"))
    handle = await owner.create(SandboxSpec())
    descriptor = await owner.serialize_handle(handle)
    borrowed = await borrower.connect(descriptor)
    source = tmp_path / "up.txt"
    source.write_text("uploaded\n")
    await borrower.upload_file(borrowed, source, "up.txt")
    await borrower.exec(borrowed, "setsid sleep 313 >/dev/null 2>&1 </dev/null &")
    await borrower.download_file(borrowed, "/workspace/up.txt", tmp_path / "down.txt")
    assert (tmp_path / "down.txt").read_text() == "uploaded\n"
    pty = await borrower.create_pty(borrowed, SandboxPtySpec())
    await borrower.close(borrowed)  # a borrower's close: its terminal goes, the sandbox stays
    assert pty.closed and await owner.status(handle) == SandboxStatus.RUNNING
    daemons = [pid for pid in handle.raw.sandbox.cgroup_members() if "sleep\x00313" in _cmdline(pid)]
    assert (await owner.exec(handle, "cat up.txt; ps -eo args | grep -c '^sleep 313'")).stdout.split() == [
        "uploaded", "1",
    ]  # fmt: skip
    borrowed = await borrower.connect(descriptor)
    await owner.close(handle)
    await asyncio.sleep(0.1)
    assert not any(_alive(pid) for pid in daemons)
    assert await borrower.status(borrowed) == SandboxStatus.STOPPED
    with pytest.raises(RuntimeError, match="closed by its owner"):
        await borrower.exec(borrowed, "true")
    with pytest.raises(SandboxCreateError, match="not a live sandbox"):
        await borrower.connect(descriptor)
    await borrower.aclose()
    await owner.aclose()
    assert not any(os.scandir(tmp_path / "owner"))


async def test_connect_needs_a_full_live_descriptor(provider: BubblewrapProvider) -> None:
    with pytest.raises(SandboxCreateError, match="not a bare sandbox id"):
        await provider.connect({"sandbox_id": "bwrap-123"})


async def test_a_forged_descriptor_joins_nothing(provider: BubblewrapProvider, tmp_path: Path) -> None:
    """Joining takes only what the owner handed out (its grant's secret); where the sandbox is,
    its pid and its mounts come from the owner's registry, never from the descriptor."""
    handle = await provider.create(SandboxSpec())
    other = await provider.create(SandboxSpec())
    descriptor = await provider.serialize_handle(handle)
    grant = descriptor["grant"]
    with pytest.raises(SandboxCreateError, match="not the one its owner handed out"):
        await provider.connect({**descriptor, "grant": {**grant, "secret": "A" * 43}})
    other_id = (await provider.serialize_handle(other))["grant"]["sandbox_id"]
    with pytest.raises(SandboxCreateError, match="not the one its owner handed out"):
        await provider.connect({**descriptor, "grant": {**grant, "sandbox_id": other_id}})
    with pytest.raises(SandboxCreateError, match="not a live sandbox"):
        await provider.connect({**descriptor, "grant": {**grant, "sandbox_id": "0" * 12}})
    with pytest.raises(SandboxCreateError):
        await provider.connect({**descriptor, "grant": {**grant, "sandbox_id": "../../../etc/passwd"}})
    # Extra keys a forger adds (an old-style ticket with one more --bind of the host, another
    # pid) are not read: the joined sandbox is the owner's, mounts and all.
    secret_dir = tmp_path / "host-secret"
    secret_dir.mkdir()
    (secret_dir / "key").write_text("host\n")
    forged = {**descriptor, "ticket": {"fs_args": ["--bind", str(secret_dir), "/workspace/stolen"],
                                       "leader_pid": os.getpid(), "workspace": str(secret_dir)}}  # fmt: skip
    joined = await provider.connect(forged)
    seen = await provider.exec(joined, f"ls /workspace/stolen {secret_dir} 2>&1; echo $?")
    assert seen.stdout.strip().endswith("2") and "key" not in seen.stdout
    await provider.close(joined)
    await provider.close(other)
    await provider.close(handle)
