# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The processes a Gym stack launch starts, recorded so that exactly they are stopped later.

Each command starts in a session (and process group) of its own, with SIGINT at its default so
it can be asked for an orderly shutdown. A `GroupRecord` keeps its pid, process group and start
time (clock ticks since boot, `process_identity`), and every descendant and group member seen
(pid + start ticks: Ray's workers leave the group, and a daemon whose parent died leaves the
tree). Stopping a group is SIGINT to its leader, then SIGTERM/SIGKILL to the group while a
recorded process is still in it, and to recorded processes still alive with the same start.
Nothing is found or killed by name, and a number the system has handed to another process since
(a pid, a process group) is never signalled.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import psutil
from pydantic import BaseModel, Field, model_validator

from nemo_gym_prorl.process_identity import is_running, start_ticks, ticks_from_create_time

Echo = Callable[[str], object]


class LaunchError(RuntimeError):
    pass


class _StartTicks(BaseModel):
    @model_validator(mode="before")
    @classmethod
    def _from_create_time(cls, data: object) -> object:
        # Records written before start ticks held psutil's wall-clock `create_time`.
        if isinstance(data, dict) and "start_ticks" not in data and "create_time" in data:
            data = dict(data)
            data["start_ticks"] = ticks_from_create_time(float(data.pop("create_time")))
        return data


class ProcRecord(_StartTicks):
    pid: int
    start_ticks: int
    name: str = ""


class GroupRecord(_StartTicks):
    role: str  # "gym" or "model"
    pid: int
    pgid: int
    start_ticks: int
    log: str
    descendants: list[ProcRecord] = Field(default_factory=list)
    # A folder the group's processes use and would leave behind (vLLM's sockets): removed once
    # the group is stopped.
    scratch_dir: str | None = None

    def recorded(self) -> list[tuple[int, int]]:
        """Every process recorded for the group, the leader first, as (pid, start ticks)."""
        return [(self.pid, self.start_ticks), *((d.pid, d.start_ticks) for d in self.descendants)]

    def running(self) -> list[tuple[int, int]]:
        """The recorded processes still running (same pid and start ticks)."""
        return [(pid, created) for pid, created in self.recorded() if is_running(pid, created)]


def spawn(cmd: list[str], *, cwd: Path, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "wb") as out:
        return subprocess.Popen(
            cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,  # its own session and process group: `down` signals only it
            preexec_fn=_default_sigint,
        )  # fmt: skip


def _default_sigint() -> None:
    # A launcher started in the background inherits SIGINT ignored; Python then never installs
    # its KeyboardInterrupt handler and `down` could not ask for an orderly shutdown.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    # The launcher holds these back while it starts and records a process (`signals_held`); the
    # child must not inherit that, or it could never be stopped by them.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, HELD_SIGNALS)


HELD_SIGNALS = frozenset({signal.SIGINT, signal.SIGTERM})


@contextmanager
def signals_held() -> Iterator[None]:
    """SIGINT and SIGTERM wait until the block ends (then their handlers run): a process started
    inside is recorded before a signal can stop the launcher between its start and its record."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, HELD_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def record(
    role: str, proc: subprocess.Popen[bytes], log: Path, *, scratch_dir: Path | None = None
) -> GroupRecord:
    # Our child, not yet reaped: its /proc entry stands even if it has already exited.
    ticks = start_ticks(proc.pid, exiting=True)
    assert ticks is not None, f"{role} (pid {proc.pid}) has no /proc entry before it was reaped"
    return GroupRecord(
        role=role,
        pid=proc.pid,
        pgid=os.getpgid(proc.pid),
        start_ticks=ticks,
        log=str(log),
        scratch_dir=str(scratch_dir) if scratch_dir is not None else None,
    )


def refresh_descendants(group: GroupRecord) -> bool:
    """Record what the group's leader has started since (its descendants, wherever their group)
    and every member of its process group (a daemon whose parent exited is no descendant any
    more). True when something new was recorded."""
    known = set(group.recorded())
    found: list[psutil.Process] = []
    if is_running(group.pid, group.start_ticks):
        with contextlib.suppress(psutil.Error):
            found += psutil.Process(group.pid).children(recursive=True)
    if owns_group(group):
        found += _group_members(group.pgid)
    added = False
    for proc in found:
        ticks = start_ticks(proc.pid)
        if ticks is None or (proc.pid, ticks) in known:
            continue
        try:
            name = proc.name()
        except psutil.Error:
            continue
        group.descendants.append(ProcRecord(pid=proc.pid, start_ticks=ticks, name=name))
        known.add((proc.pid, ticks))
        added = True
    return added


def owns_group(group: GroupRecord) -> bool:
    """Whether `group.pgid` still names the group the launch started: true while a recorded
    process (pid and start time) is in it, since the system hands a group's number out again
    only once the group is empty."""
    for pid, created in group.recorded():
        try:
            if is_running(pid, created) and os.getpgid(pid) == group.pgid:
                return True
        except (ProcessLookupError, PermissionError):
            continue
    return False


def _group_members(pgid: int) -> list[psutil.Process]:
    members = []
    for proc in psutil.process_iter():
        try:
            if os.getpgid(proc.pid) == pgid:
                members.append(proc)
        except (ProcessLookupError, PermissionError):
            continue
    return members


def tail(path: str | Path, n: int = 40) -> str:
    try:
        return "\n".join(Path(path).read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return ""


def wait_http(
    url: str,
    proc: subprocess.Popen[bytes],
    timeout_s: float,
    what: str,
    log: Path,
    *,
    on_poll: Callable[[], object] | None = None,
) -> None:
    """Until `url` answers below 300; LaunchError (with the log's tail) if `proc` exits first or
    the time runs out. `on_poll` runs before every probe (the launcher records what has started)."""
    deadline = time.monotonic() + timeout_s
    last = ""
    while time.monotonic() < deadline:
        if on_poll is not None:
            on_poll()
        if proc.poll() is not None:
            raise LaunchError(f"{what} exited with code {proc.returncode}; log {log}:\n{tail(log)}")
        try:
            response = httpx.get(url, timeout=2)
            if response.status_code < 300:
                return
            last = f"HTTP {response.status_code}"
        except httpx.HTTPError as exc:
            last = type(exc).__name__
        time.sleep(1.0)
    raise LaunchError(f"{what} not ready after {timeout_s:.0f}s ({last}); log {log}:\n{tail(log)}")


def stop_group(group: GroupRecord, *, echo: Echo = print, grace_s: float = 60.0) -> None:
    """Stop what the group still runs, and say what that was: nothing, or how many recorded
    processes were running and whether any outlived every signal."""
    refresh_descendants(group)
    running = group.running()
    what = f"{group.role} (pid {group.pid}, {len(group.descendants)} descendant(s) recorded)"
    if not running:  # nor, then, does the group hold any recorded process
        _remove_scratch(group)
        echo(f"[gym] {what}: none of its processes was running")
        return
    if is_running(group.pid, group.start_ticks):
        # `gym env start` and the vLLM server both shut down in order on SIGINT (Ctrl-C).
        os.kill(group.pid, signal.SIGINT)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and is_running(group.pid, group.start_ticks):
            time.sleep(0.5)
    # Whatever is left of the group while it is still ours, and recorded descendants that left it
    # (same pid AND start ticks).
    if owns_group(group):
        _signal_group(group.pgid, signal.SIGTERM)
        _wait_gone(lambda: not owns_group(group), 10.0)
        if owns_group(group):
            _signal_group(group.pgid, signal.SIGKILL)
    leftovers = [d for d in group.descendants if is_running(d.pid, d.start_ticks)]
    for d in leftovers:
        _kill(d.pid, signal.SIGTERM)
    _wait_gone(lambda: not any(is_running(d.pid, d.start_ticks) for d in leftovers), 10.0)
    for d in leftovers:
        if is_running(d.pid, d.start_ticks):
            _kill(d.pid, signal.SIGKILL)
    _remove_scratch(group)
    _wait_gone(lambda: not group.running(), 5.0)
    survivors = [pid for pid, _ in group.running()]
    if survivors:
        echo(f"[gym] {what}: pids {survivors} are still running after SIGKILL")
    else:
        echo(f"[gym] stopped {what}: it ran {len(running)} process(es)")


def _remove_scratch(group: GroupRecord) -> None:
    if group.scratch_dir is not None:
        shutil.rmtree(group.scratch_dir, ignore_errors=True)


def _kill(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _wait_gone(done: Callable[[], bool], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and not done():
        time.sleep(0.2)
