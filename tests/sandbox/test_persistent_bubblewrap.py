# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The persistent bubblewrap sandbox (`PERSISTENT_BACKEND`) and other processes joining it.

Built by `open_sandbox`, it is started: a daemon outlives its exec. Its grant lets another
process join the very same sandbox (files, /tmp, processes); the joiner's close leaves the
sandbox alone; the owner's close ends everything, the joiner's processes included. A grant the
owner did not hand out, or whose sandbox has closed, is refused; so is a registered sandbox whose
init is gone, or whose pid is another process now, saying so."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from nemo_gym_prorl.process_identity import start_ticks
from nemo_gym_prorl.sandbox import SandboxError, SandboxSpec, open_sandbox, persistent
from nemo_gym_prorl.sandbox.join_registry import JoinGrant, JoinRefusedError
from nemo_gym_prorl.sandbox.leftovers import sandbox_dirs
from nemo_gym_prorl.sandbox.limits import PidsCgroup
from nemo_gym_prorl.sandbox.persistent import (
    PERSISTENT_BACKEND,
    JoinedBubblewrapSandbox,
    PersistentBubblewrapSandbox,
    SandboxGoneError,
    check_ticket,
)

pytestmark = pytest.mark.bwrap

# Another process joins the sandbox from its grant, runs `argv[2]` there and prints the result.
_JOINER = """
import asyncio, json, sys
from nemo_gym_prorl.sandbox.join_registry import JoinGrant
from nemo_gym_prorl.sandbox.persistent import JoinedBubblewrapSandbox

async def main():
    joined = JoinedBubblewrapSandbox(JoinGrant.model_validate_json(sys.argv[1]))
    try:
        result = await joined.exec(sys.argv[2], timeout=30)
        print(json.dumps({"exit": result.exit_code, "out": result.stdout, "err": result.stderr}))
    finally:
        await joined.aclose()

asyncio.run(main())
"""


def join_and_run(grant: JoinGrant, command: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", _JOINER, grant.model_dump_json(), command],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture
async def owner(tmp_path: Path) -> AsyncIterator[PersistentBubblewrapSandbox]:
    box = await asyncio.to_thread(open_sandbox, SandboxSpec(backend=PERSISTENT_BACKEND, root_dir=tmp_path))
    assert isinstance(box, PersistentBubblewrapSandbox) and box.started
    yield box
    await box.aclose()


async def _pids_of(box: PersistentBubblewrapSandbox | JoinedBubblewrapSandbox, pattern: str) -> list[str]:
    """The pids whose command line holds `pattern`, waiting a few seconds for one to show: a
    detached daemon starts on its own time, after the command that started it has returned (until
    it execs, it is a copy of that command's shell, whose line the filter leaves out)."""
    deadline = time.monotonic() + 10
    while True:
        listing = await box.exec(["/bin/sh", "-c", "ps -eo pid=,args="])
        found = [
            line.split()[0]
            for line in listing.stdout.splitlines()
            if pattern in line and "ps -eo" not in line
        ]
        if found or time.monotonic() > deadline:
            return found
        await asyncio.sleep(0.1)


async def test_a_daemon_outlives_its_exec(owner: PersistentBubblewrapSandbox) -> None:
    await owner.exec("setsid sleep 301 >/dev/null 2>&1 </dev/null &")
    assert await _pids_of(owner, "sleep 301")


async def test_another_process_joins_the_same_sandbox(owner: PersistentBubblewrapSandbox) -> None:
    owner.write_file("note.txt", "from the owner\n")
    await owner.exec("echo in-tmp > /tmp/t.txt; setsid sleep 302 >/dev/null 2>&1 </dev/null &")
    seen = join_and_run(
        owner.join_grant(),
        "cat note.txt /tmp/t.txt; ps -eo args | grep -c '^sleep 302'; echo joined > back.txt; "
        "setsid sleep 303 >/dev/null 2>&1 </dev/null &",
    )
    assert seen["exit"] == 0 and str(seen["out"]).split() == ["from", "the", "owner", "in-tmp", "1"]
    # The joiner has exited and closed: what it wrote and the daemon it detached are still here.
    assert owner.read_file("back.txt") == b"joined\n"
    assert await _pids_of(owner, "sleep 303")
    assert (owner.tmp_dir / "t.txt").read_text() == "in-tmp\n"


async def test_the_owners_close_ends_what_a_joiner_started(owner: PersistentBubblewrapSandbox) -> None:
    joined = await asyncio.to_thread(JoinedBubblewrapSandbox, owner.join_grant())
    await joined.exec("setsid sleep 304 >/dev/null 2>&1 </dev/null &")
    assert joined.id == owner.id and joined.init_alive
    await joined.aclose()  # the joiner's close: the sandbox and the daemon stay
    assert owner.init_alive and await _pids_of(owner, "sleep 304")
    joined = await asyncio.to_thread(JoinedBubblewrapSandbox, owner.join_grant())
    daemon_pids = _host_pids("sleep\x00304\x00")
    assert daemon_pids
    grant = owner.join_grant()
    owner.close()
    assert not joined.init_alive
    with pytest.raises(SandboxGoneError, match="closed by its owner"):
        await joined.exec("true")
    joined.close()
    assert not any(start_ticks(pid) is not None for pid in daemon_pids)
    with pytest.raises(JoinRefusedError, match="not a live sandbox"):
        JoinedBubblewrapSandbox(grant)


def _host_pids(cmdline: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "cmdline").read_text() == cmdline:
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


async def test_a_grant_its_owner_did_not_hand_out_is_refused(owner: PersistentBubblewrapSandbox) -> None:
    grant = owner.join_grant()
    forged_secret = grant.model_copy(update={"secret": "x" * 43})
    with pytest.raises(JoinRefusedError, match="not the one its owner handed out"):
        JoinedBubblewrapSandbox(forged_secret)
    unknown = grant.model_copy(update={"sandbox_id": "0" * 12})
    with pytest.raises(JoinRefusedError, match="not a live sandbox"):
        JoinedBubblewrapSandbox(unknown)
    with pytest.raises(ValueError):
        JoinGrant(sandbox_id="../../etc", secret=grant.secret)


async def test_a_registered_sandbox_whose_init_is_another_process_is_refused(
    owner: PersistentBubblewrapSandbox,
) -> None:
    ticket = owner.join_ticket()
    restarted = ticket.model_copy(update={"leader_start_ticks": ticket.leader_start_ticks + 1})
    with pytest.raises(SandboxGoneError, match="has exited"):
        check_ticket(restarted)
    # A live pid with the right start time that is not the sandbox's init (here: this process).
    reused = ticket.model_copy(
        update={"leader_pid": os.getpid(), "leader_start_ticks": start_ticks(os.getpid())}
    )
    with pytest.raises(SandboxGoneError, match="is not its init"):
        check_ticket(reused)
    elsewhere = ticket.model_copy(update={"boot_id": "another-boot"})
    with pytest.raises(SandboxGoneError, match="not on this host"):
        check_ticket(elsewhere)


def test_the_plain_backend_is_unchanged(tmp_path: Path) -> None:
    with open_sandbox(SandboxSpec(root_dir=tmp_path)) as box:
        assert type(box).__name__ == "BubblewrapSandbox"


def test_the_sandbox_outlives_the_thread_that_built_it(tmp_path: Path) -> None:
    # bwrap's --die-with-parent follows the spawning thread: `asyncio.to_thread` workers end.
    built: list[PersistentBubblewrapSandbox] = []
    spec = SandboxSpec(backend=PERSISTENT_BACKEND, root_dir=tmp_path)
    worker = threading.Thread(target=lambda: built.append(open_sandbox(spec)))  # type: ignore[arg-type]
    worker.start()
    worker.join()
    time.sleep(0.2)
    with built[0] as box:
        assert box.init_alive


def test_an_init_that_ends_before_it_runs_is_refused_with_its_status(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(persistent, "INIT_ARGV", ["/bin/sh", "-c", "echo no-such-thing >&2; exit 7"])
    with pytest.raises(SandboxError, match="init exited with 7: no-such-thing"):
        PersistentBubblewrapSandbox(
            SandboxSpec(backend=PERSISTENT_BACKEND, root_dir=tmp_path), ready_timeout_s=30
        )
    assert sandbox_dirs(tmp_path) == []


def test_an_init_that_never_says_it_runs_times_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(persistent, "INIT_ARGV", ["/bin/sh", "-c", "while read -r _; do :; done"])
    with pytest.raises(SandboxError, match="did not start in time"):
        PersistentBubblewrapSandbox(
            SandboxSpec(backend=PERSISTENT_BACKEND, root_dir=tmp_path), ready_timeout_s=0.5
        )
    assert sandbox_dirs(tmp_path) == []


async def test_close_returns_once_every_process_of_the_sandbox_is_gone_and_only_then_removes_its_cgroup(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The kernel ends the namespace with its pid 1, which exits last: close waits for that, so
    the cgroup (where one is writable) is empty when it is removed, not retried until it is."""
    members_at_removal: list[list[int]] = []
    remove = PidsCgroup.remove

    def remove_and_note(group: PidsCgroup) -> None:
        members_at_removal.append(group.members())
        remove(group)

    monkeypatch.setattr(PidsCgroup, "remove", remove_and_note)
    box = await asyncio.to_thread(open_sandbox, SandboxSpec(backend=PERSISTENT_BACKEND, root_dir=tmp_path))
    assert isinstance(box, PersistentBubblewrapSandbox)
    started = await box.exec("sleep 300 >/dev/null 2>&1 &")
    assert started.exit_code == 0, started.stderr
    leader = box.join_ticket().leader_pid
    had_cgroup = box.cgroup_path is not None
    await box.aclose()
    assert start_ticks(leader) is None  # exited (a zombie at most, until its new parent reaps it)
    assert members_at_removal == ([[]] if had_cgroup else [])
    assert sandbox_dirs(tmp_path) == []
