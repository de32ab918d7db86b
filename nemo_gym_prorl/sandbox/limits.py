# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Turning `SandboxLimits` into enforcement: rlimits set by a tiny shell prelude, plus a pids
cgroup where one is writable.

Why both: RLIMIT_NPROC does not bind a process whose host uid is root (even inside a user
namespace), so a fork bomb in a sandbox started by root is only contained by the pids cgroup.
Unprivileged users on clusters (the common case) are contained by the rlimit alone.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shlex
import signal
import time
from pathlib import Path

from nemo_gym_prorl.sandbox.spec import SandboxLimits

logger = logging.getLogger(__name__)

_PIDS_V1 = Path("/sys/fs/cgroup/pids")
_CGROUP_ROOT = Path("/sys/fs/cgroup")


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
    if limits.max_processes is None or limits.accept_no_process_limit or cgroup is not None:
        return True
    return os.geteuid() != 0 and identity is None


def _pids_parent() -> Path | None:
    """The directory under which we may create per-sandbox pids cgroups, if any."""
    if (_PIDS_V1 / "cgroup.procs").exists() and os.access(_PIDS_V1, os.W_OK):
        return _PIDS_V1 / "prorl"
    unified = _CGROUP_ROOT / "cgroup.controllers"
    if unified.exists() and "pids" in unified.read_text().split():
        own = Path("/proc/self/cgroup").read_text().strip().splitlines()[-1].split(":", 2)[2]
        base = _CGROUP_ROOT / own.lstrip("/")
        if os.access(base, os.W_OK) and "pids" in (base / "cgroup.subtree_control").read_text().split():
            return base / "prorl"
    return None


class PidsCgroup:
    """A pids cgroup owned by one sandbox: every process it starts joins it; close kills them.

    Only processes we placed in it can be in it, so killing its members never touches
    anything the project did not start.
    """

    def __init__(self, path: Path, max_pids: int) -> None:
        self.path = path
        path.mkdir(parents=True, exist_ok=True)
        (path / "pids.max").write_text(str(max_pids))

    @classmethod
    def create(cls, name: str, max_pids: int | None) -> PidsCgroup | None:
        """`name` must start with `<owner pid>-` (see `reap_orphans`)."""
        if max_pids is None:
            return None
        parent = _pids_parent()
        if parent is None:
            return None
        try:
            return cls(parent / name, max_pids)
        except OSError as exc:  # read-only mount, delegated-but-not-ours, etc.
            logger.debug("pids cgroup unavailable (%s); relying on RLIMIT_NPROC", exc)
            return None

    def wrap_prefix(self) -> list[str]:
        """A command prefix that joins the cgroup first, then execs the rest: no child can be
        forked outside it."""
        procs = shlex.quote(str(self.path / "cgroup.procs"))
        return ["/bin/sh", "-c", f'echo $$ > {procs} && exec "$@"', "sh"]

    def members(self) -> list[int]:
        try:
            return [int(p) for p in (self.path / "cgroup.procs").read_text().split()]
        except OSError:
            return []

    def kill_all(self) -> None:
        kill_file = self.path / "cgroup.kill"  # cgroup v2: atomic
        if kill_file.exists():
            with contextlib.suppress(OSError):
                kill_file.write_text("1")
        # v1 (or v2 fallback): freeze-free loop; a fork bomb may respawn between reads, but it
        # cannot grow past pids.max and each pass kills everything it sees.
        for _ in range(50):
            members = self.members()
            if not members:
                return
            for pid in members:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)

    def remove(self) -> None:
        self.kill_all()
        for _ in range(100):
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:  # members still exiting
                self.kill_all()
                time.sleep(0.01)
        logger.warning("could not remove cgroup %s", self.path)


def _owner_alive(name: str) -> bool:
    pid = name.split("-", 1)[0]
    if not pid.isdigit():
        return True  # not named by us: leave it alone
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def reap_orphan_cgroups() -> list[str]:
    """Remove the pids cgroups of sandboxes whose owning process is gone (it was killed before
    it could close them), killing what is still inside: those processes were started by this
    project's sandboxes and nobody owns them any more. Returns the names removed."""
    parent = _pids_parent()
    if parent is None or not parent.is_dir():
        return []
    reaped = []
    for child in parent.iterdir():
        if child.is_dir() and not _owner_alive(child.name):
            group = PidsCgroup.__new__(PidsCgroup)
            group.path = child
            group.remove()
            reaped.append(child.name)
    return reaped
