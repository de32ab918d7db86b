# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Turning `SandboxLimits` into enforcement: rlimits set by a tiny shell prelude, plus the
sandbox's own cgroups where they are writable (pids, memory, cpu).

Why both: RLIMIT_NPROC does not bind a process whose host uid is root (even inside a user
namespace), so a fork bomb in a sandbox started by root is only contained by the pids cgroup.
Unprivileged users on clusters (the common case) are contained by the rlimit alone. Rlimits are
per process; only a cgroup bounds a sandbox's processes together (its memory, its CPU time).
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import shlex
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal, get_args

from nemo_gym_prorl.sandbox.spec import SandboxLimits

logger = logging.getLogger(__name__)

_CGROUP_ROOT = Path("/sys/fs/cgroup")
_CPU_PERIOD_US = 100_000
_MIN_CPU_QUOTA_US = 1_000  # the kernel refuses a smaller quota
Controller = Literal["pids", "memory", "cpu"]
CONTROLLERS: tuple[Controller, ...] = get_args(Controller)


def rlimit_prelude(limits: SandboxLimits) -> str:
    """A POSIX-sh snippet that applies the limits to itself before `exec "$@"`.

    POSIX sh is in every image (bubblewrap rootfs, Apptainer .sif), unlike prlimit(1).
    """
    parts: list[str] = []
    if limits.memory_mb is not None:
        parts.append(f"ulimit -v {limits.memory_mb * 1024}")
    if limits.max_processes is not None:
        # bash/ksh spell it -u, dash/busybox -p; whichever this image's sh understands.
        parts.append(
            f"{{ ulimit -u {limits.max_processes} || ulimit -p {limits.max_processes}; }} 2>/dev/null"
        )
    if limits.max_file_mb is not None:
        parts.append(f"ulimit -f {limits.max_file_mb * 2048}")  # 512-byte blocks
    parts.append('exec "$@"')
    return "; ".join(parts)


def wrap_with_rlimits(argv: list[str], limits: SandboxLimits) -> list[str]:
    return ["/bin/sh", "-c", rlimit_prelude(limits), "sh", *argv]


def process_limit_binds(limits: SandboxLimits, cgroup: PidsCgroup | None, identity: object | None) -> bool:
    """Whether `max_processes` is enforced for a sandbox (or explicitly waived). Without a pids
    cgroup, RLIMIT_NPROC binds an unprivileged service's sandboxes; a root service's share one
    uid, which RLIMIT_NPROC would count as one sandbox, so they need the cgroup."""
    if limits.max_processes is None or limits.accept_no_process_limit:
        return True
    if cgroup is not None and "pids" in cgroup.controllers:
        return True
    return os.geteuid() != 0 and identity is None


def _words(path: Path) -> list[str]:
    try:
        return path.read_text().split()
    except OSError:
        return []


def _cgroups_of(pid: int | Literal["self"]) -> dict[str, str]:
    """A process's cgroup per v1 controller (`name=` hierarchies too), and its v2 one under ""."""
    found: dict[str, str] = {}
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            found[controller] = path
    return found


def _controller_parent(controller: Controller) -> Path | None:
    """The directory under which this process may create sandbox groups of `controller`, if any:
    `prorl` below its own group (in the controller's v1 hierarchy, or the unified v2 one), so a
    sandbox stays inside whatever limits the service itself runs under."""
    try:
        own = _cgroups_of("self")
    except OSError:
        return None
    if controller in own and (_CGROUP_ROOT / controller / "cgroup.procs").exists():  # v1
        base = _CGROUP_ROOT / controller / own[controller].lstrip("/")
    elif "" in own and controller in _words(_CGROUP_ROOT / "cgroup.controllers"):  # v2
        base = _CGROUP_ROOT / own[""].lstrip("/")
        # A v2 child only gets the controllers its parent hands down.
        if controller not in _words(base / "cgroup.subtree_control"):
            return None
    else:
        return None
    return base / "prorl" if base.is_dir() and os.access(base, os.W_OK) else None


def _pids_parent() -> Path | None:
    return _controller_parent("pids")


def writable_controllers() -> dict[Controller, Path]:
    """Each controller a sandbox's group can be made for on this machine, with where it goes."""
    parents: dict[Controller, Path | None] = {
        "pids": _pids_parent(),
        "memory": _controller_parent("memory"),
        "cpu": _controller_parent("cpu"),
    }
    return {controller: parent for controller, parent in parents.items() if parent is not None}


def _settings(controller: Controller, limits: SandboxLimits, v2: bool) -> list[tuple[str, str]]:
    """The files to write for `controller`, in order; empty when the limits do not use it."""
    if controller == "pids" and limits.max_processes is not None:
        return [("pids.max", str(limits.max_processes))]
    if controller == "memory" and limits.sandbox_memory_mb is not None:
        size = str(limits.sandbox_memory_mb << 20)
        # Swap counts too: otherwise a sandbox past its limit pages out instead of being stopped.
        if v2:
            return [("memory.max", size), ("memory.swap.max", "0")]
        return [("memory.limit_in_bytes", size), ("memory.memsw.limit_in_bytes", size)]
    if controller == "cpu" and limits.cpus is not None:
        quota = str(max(_MIN_CPU_QUOTA_US, round(limits.cpus * _CPU_PERIOD_US)))
        if v2:
            return [("cpu.max", f"{quota} {_CPU_PERIOD_US}")]
        return [("cpu.cfs_period_us", str(_CPU_PERIOD_US)), ("cpu.cfs_quota_us", quota)]
    return []


def _uses(controller: Controller, limits: SandboxLimits) -> bool:
    """Whether a sandbox with these limits gets a group of `controller`.

    Every niced sandbox gets a cpu group, quota or not. A nice ranks a process only within its
    scheduling group, and with the kernel's autogroups on (most desktops, many servers) every
    session is such a group: each sandbox starts its own, so each weighed as much as the whole
    service, and a few hundred busy ones left the event loop that drives every rollout a sliver
    of a core. In cpu groups, all below one parent of the default weight, the sandboxes together
    weigh as one program beside the service. Not less: a group weighted lower is starved by every
    other busy program on the machine (a trainer, a model server), and its killed processes then
    take seconds to exit.
    """
    return bool(_settings(controller, limits, v2=False)) or (controller == "cpu" and bool(limits.nice))


def _make_group(parent: Path, path: Path, controller: Controller, limits: SandboxLimits) -> None:
    v2 = (parent.parent / "cgroup.controllers").exists()  # only the unified hierarchy has the file
    parent.mkdir(exist_ok=True)
    if v2 and controller not in _words(parent / "cgroup.subtree_control"):
        (parent / "cgroup.subtree_control").write_text(f"+{controller}")  # hand it down to the groups
    path.mkdir(exist_ok=True)
    for name, value in _settings(controller, limits, v2):
        target = path / name
        if name in ("memory.memsw.limit_in_bytes", "memory.swap.max") and not target.exists():
            continue  # swap is not accounted on this kernel: the memory limit alone applies
        target.write_text(value)


class PidsCgroup:
    """A sandbox's cgroups, one per controller its limits use (pids, memory, cpu): every process
    it starts joins all of them through one prefix; removal kills what is inside.

    Only processes we placed in them can be in them, so killing their members never touches
    anything the project did not start. `path` is the main group (the pids one where there is
    one); an object given only an existing sandbox's `path` finds the other groups by its members.
    """

    controllers: tuple[Controller, ...] = ()  # what the groups enforce (known to their creator)
    _paths: list[Path] | None = None

    def __init__(self, groups: dict[Controller, Path]) -> None:
        self.controllers = tuple(groups)
        self._paths = list(dict.fromkeys(groups.values()))  # v2: one directory for all
        self.path = groups.get("pids") or self._paths[0]

    @classmethod
    def create(cls, name: str, limits: SandboxLimits) -> PidsCgroup | None:
        """`name` must start with `<owner pid>-` (see `reap_orphan_cgroups`). None when the limits
        use no controller or none is writable; a controller that is not is logged and skipped."""
        parents = writable_controllers()
        groups: dict[Controller, Path] = {}
        for controller in CONTROLLERS:
            if not _uses(controller, limits):
                continue
            parent = parents.get(controller)
            if parent is None:
                # Without a pids group the caller decides (RLIMIT_NPROC); without a cpu group a
                # niced sandbox still has its nice, so only a quota goes unenforced.
                if controller != "pids" and _settings(controller, limits, v2=False):
                    logger.warning("no writable %s cgroup: the sandbox's %s limit is not enforced",
                                   controller, controller)  # fmt: skip
                continue
            path = parent / name
            try:
                _make_group(parent, path, controller, limits)
            except OSError as exc:  # read-only mount, delegated-but-not-ours, etc.
                logger.warning("%s cgroup unavailable (%s): that limit is not enforced", controller, exc)
                if path not in groups.values():  # v2: the directory may hold another controller
                    with contextlib.suppress(OSError):
                        path.rmdir()
                continue
            groups[controller] = path
        return cls(groups) if groups else None

    @property
    def paths(self) -> list[Path]:
        """Each directory to join: one per v1 hierarchy, the one shared directory in v2."""
        if self._paths is None:
            self._paths = _groups_like(self.path)
        return self._paths

    def wrap_prefix(self) -> list[str]:
        """A command prefix that joins every group first, then execs the rest: no child can be
        forked outside them."""
        joins = " && ".join(f"echo $$ > {shlex.quote(str(path / 'cgroup.procs'))}" for path in self.paths)
        return ["/bin/sh", "-c", f'{joins} && exec "$@"', "sh"]

    def members(self) -> list[int]:
        return sorted({pid for path in self.paths for pid in _members(path)})

    def kill_all(self) -> None:
        for path in self.paths:
            _kill_members(path)

    def remove(self) -> None:
        self.kill_all()
        for path in self.paths:
            _remove_group(path)


def _members(path: Path) -> list[int]:
    try:
        return [int(p) for p in (path / "cgroup.procs").read_text().split()]
    except OSError:
        return []


def _groups_like(path: Path) -> list[Path]:
    """A sandbox's groups, found from one of them: the groups of its members that carry the same
    name (a process joining another's sandbox is handed only the main group's path)."""
    groups = [path]
    for pid in _members(path):
        try:
            theirs = _cgroups_of(pid)
        except OSError:  # exited meanwhile: ask the next one
            continue
        for controller in CONTROLLERS:  # v1 hierarchies; in v2 `path` is already all of them
            if controller in theirs and Path(theirs[controller]).name == path.name:
                groups.append(_CGROUP_ROOT / controller / theirs[controller].lstrip("/"))
        break
    return list(dict.fromkeys(groups))


def _kill_members(path: Path) -> None:
    kill_file = path / "cgroup.kill"  # cgroup v2: atomic
    if kill_file.exists():
        with contextlib.suppress(OSError):
            kill_file.write_text("1")
    # v1 (or v2 fallback): freeze-free loop; a fork bomb may respawn between reads, but it
    # cannot grow past pids.max and each pass kills everything new it sees. A pid signalled
    # already is not signalled again: a killed process stays listed until it has exited, and
    # re-reading and re-killing it fifty times over was a busy loop that held the GIL from the
    # event loop at every sandbox's close.
    signalled: set[int] = set()
    for _ in range(50):
        fresh = [pid for pid in _members(path) if pid not in signalled]
        if not fresh:
            return
        for pid in fresh:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        signalled.update(fresh)


# Groups whose killed members had not all exited when their sandbox closed (a machine so busy
# that a second was not enough): removed by a later removal, so none accumulates while the
# service runs. Their names carry the live owner's pid, so the orphan reaper would not take them.
_LEFT_FOR_LATER: set[Path] = set()
_LEFT_LOCK = threading.Lock()


def _try_remove(path: Path) -> bool:
    try:
        path.rmdir()
    except FileNotFoundError:
        pass
    except OSError:  # members still exiting
        return False
    return True


def _remove_left_for_later() -> None:
    with _LEFT_LOCK:
        waiting = list(_LEFT_FOR_LATER)
    for path in waiting:
        _kill_members(path)
        if _try_remove(path):
            with _LEFT_LOCK:
                _LEFT_FOR_LATER.discard(path)


def _remove_group(path: Path) -> None:
    _remove_left_for_later()
    for _ in range(100):
        if _try_remove(path):
            return
        _kill_members(path)
        time.sleep(0.01)
    logger.info("cgroup %s still has exiting members: removed later", path)
    with _LEFT_LOCK:
        if not _LEFT_FOR_LATER:
            atexit.register(_remove_left_at_exit)
        _LEFT_FOR_LATER.add(path)


def _remove_left_at_exit(patience_s: float = 5.0) -> None:
    """At exit, what is still left gets a few more seconds (nothing of it may outlive the service)."""
    deadline = time.monotonic() + patience_s
    while _LEFT_FOR_LATER and time.monotonic() < deadline:
        _remove_left_for_later()
        time.sleep(0.05)
    for path in _LEFT_FOR_LATER:
        logger.warning("could not remove cgroup %s", path)


def remove_cgroups_of(owner: int) -> list[str]:
    """Remove the sandbox cgroups, in every controller, that process `owner` made (named
    `<owner>-...`), killing what is still inside. Returns the names removed."""
    return _remove_groups(lambda name: name.split("-", 1)[0] == str(owner))


def _remove_groups(chosen: Callable[[str], bool]) -> list[str]:
    """Remove every sandbox cgroup whose name is `chosen`, in every controller, killing what is
    still inside. Returns the names removed."""
    removed: dict[str, None] = {}
    for parent in dict.fromkeys(writable_controllers().values()):
        for child in parent.iterdir() if parent.is_dir() else ():
            if child.is_dir() and chosen(child.name):
                _kill_members(child)
                _remove_group(child)
                removed[child.name] = None
    return list(removed)


def pid_alive(pid: int) -> bool:
    """Whether a process `pid` exists (another user's counts: it is alive, just not ours)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _owner_alive(name: str) -> bool:
    pid = name.split("-", 1)[0]
    if not pid.isdigit():
        return True  # not named by us: leave it alone
    return pid_alive(int(pid))


def reap_orphan_cgroups() -> list[str]:
    """Remove the cgroups, in every controller, of sandboxes whose owning process is gone (it was
    killed before it could close them), killing what is still inside: those processes were
    started by this project's sandboxes and nobody owns them any more. Returns the names removed."""
    return _remove_groups(lambda name: not _owner_alive(name))
