# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The processes a Gym stack launch starts, recorded so that exactly they are stopped later.

Each command starts in a session (and process group) of its own, with SIGINT at its default so
it can be asked for an orderly shutdown. A `GroupRecord` keeps its pid, process group and start
time, and every descendant seen (pid + start time: Ray daemons may leave the group). Stopping a
group is SIGINT to its leader, then SIGTERM/SIGKILL to the group and to recorded descendants still
alive with the same start time. Nothing is found or killed by name.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import psutil
from pydantic import BaseModel, Field

Echo = Callable[[str], object]


class LaunchError(RuntimeError):
    pass


class ProcRecord(BaseModel):
    pid: int
    create_time: float
    name: str = ""


class GroupRecord(BaseModel):
    role: str  # "gym" or "model"
    pid: int
    pgid: int
    create_time: float
    log: str
    descendants: list[ProcRecord] = Field(default_factory=list)
    # A folder the group's processes use and would leave behind (vLLM's sockets): removed once
    # the group is stopped.
    scratch_dir: str | None = None


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


def record(
    role: str, proc: subprocess.Popen[bytes], log: Path, *, scratch_dir: Path | None = None
) -> GroupRecord:
    p = psutil.Process(proc.pid)
    return GroupRecord(
        role=role,
        pid=proc.pid,
        pgid=os.getpgid(proc.pid),
        create_time=p.create_time(),
        log=str(log),
        scratch_dir=str(scratch_dir) if scratch_dir is not None else None,
    )


def refresh_descendants(group: GroupRecord) -> None:
    try:
        root = psutil.Process(group.pid)
        if root.create_time() != group.create_time:
            return
        known = {(d.pid, d.create_time) for d in group.descendants}
        for child in root.children(recursive=True):
            with_time = (child.pid, child.create_time())
            if with_time not in known:
                group.descendants.append(
                    ProcRecord(pid=child.pid, create_time=with_time[1], name=child.name())
                )
    except psutil.Error:
        return


def tail(path: str | Path, n: int = 40) -> str:
    try:
        return "\n".join(Path(path).read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return ""


def wait_http(url: str, proc: subprocess.Popen[bytes], timeout_s: float, what: str, log: Path) -> None:
    """Until `url` answers below 300; LaunchError (with the log's tail) if `proc` exits first or
    the time runs out."""
    deadline = time.monotonic() + timeout_s
    last = ""
    while time.monotonic() < deadline:
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


def alive(pid: int, create_time: float) -> bool:
    try:
        p = psutil.Process(pid)
        return p.create_time() == create_time and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def stop_group(group: GroupRecord, *, echo: Echo = print, grace_s: float = 60.0) -> None:
    refresh_descendants(group)
    if alive(group.pid, group.create_time):
        # `gym env start` and the vLLM server both shut down in order on SIGINT (Ctrl-C).
        os.kill(group.pid, signal.SIGINT)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and alive(group.pid, group.create_time):
            time.sleep(0.5)
    # Whatever is left of the group, and recorded descendants that left it (same pid AND start time).
    if _group_alive(group.pgid):
        _signal_group(group.pgid, signal.SIGTERM)
        _wait_gone(lambda: not _group_alive(group.pgid), 10.0)
        _signal_group(group.pgid, signal.SIGKILL)
    leftovers = [d for d in group.descendants if alive(d.pid, d.create_time)]
    for d in leftovers:
        _kill(d.pid, signal.SIGTERM)
    _wait_gone(lambda: not any(alive(d.pid, d.create_time) for d in leftovers), 10.0)
    for d in leftovers:
        if alive(d.pid, d.create_time):
            _kill(d.pid, signal.SIGKILL)
    if group.scratch_dir is not None:
        shutil.rmtree(group.scratch_dir, ignore_errors=True)
    echo(f"[gym] stopped {group.role} (pid {group.pid}, {len(group.descendants)} descendant(s) recorded)")


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


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def _wait_gone(done: Callable[[], bool], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and not done():
        time.sleep(0.2)
