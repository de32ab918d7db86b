# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""What a sandbox owner killed with `kill -9` leaves behind, and its removal.

    remove_dead_owners_leftovers(root)   a dead owner's sandbox directories under `root` (for SWE
                                         a repository copy each) and its cgroups, removed
    reap_now_and_then(root)              the same, from any process that opens sandboxes: at its
                                         first open and then at most once a `REAP_INTERVAL_S`
    remove_own_leftovers()               this process's own, as it exits (`atexit`): a sandbox
                                         opened while the loop that would close it ended

A sandbox's directory is named `<owner pid>-<id>` and its cgroups `<owner pid>-<backend>-<id>`
(`Sandbox` names them), so a dead owner's are known by name: an owner pid that is gone. A pid says nothing on
another machine or in another pid namespace, so a directory also says where its owner ran (its
`owner` file: the kernel's boot id and pid namespace) and is taken only by a process that runs
there too: a sandbox root on a shared file system, or bound into two containers, loses no live
sandbox. A live owner's sandboxes are never touched, and an owner whose pid another process took
since is not known to be gone: its leftovers stay until that process ends too.
"""

from __future__ import annotations

import atexit
import functools
import logging
import os
import re
import shutil
import threading
import time
from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel, Field

from nemo_gym_prorl.process_identity import boot_id
from nemo_gym_prorl.sandbox.limits import (
    pid_alive,
    reap_orphan_cgroups,
    remove_cgroups_of,
    writable_controllers,
)

logger = logging.getLogger(__name__)

# A sandbox's directory (`<owner pid>-<id>`) or cgroup (`<owner pid>-<backend>-<id>`).
_SANDBOX_NAME = re.compile(r"^(?P<pid>\d+)-(?:[a-z_]+-)?(?P<id>[0-9a-f]{12})$")

# How often a process that keeps opening sandboxes looks for a dead owner's leftovers: a node of a
# Ray cluster killed mid-run leaves its sandboxes to the survivors' next opens.
REAP_INTERVAL_S = 1.0


class Leftovers(BaseModel):
    """What a clean-up removed."""

    removed_dirs: list[str] = Field(default_factory=list)
    removed_cgroups: list[str] = Field(default_factory=list)


def dead_owners_names(names: Iterable[str], previous_pids: Iterable[int] = ()) -> list[str]:
    """The sandbox names among `names` whose owner is gone: an owner pid that is dead, or this
    process's own pid when a journal's dead service had it (`previous_pids`: a container
    restarted gives its service the same pid; this one has opened no sandbox yet). A previous
    pid alive in another process is that process's: its sandboxes are left alone."""
    previous = set(previous_pids)
    alive: dict[int, bool] = {}  # a few owners, a thousand sandboxes: one check per owner
    dead: list[str] = []
    for name in names:
        match = _SANDBOX_NAME.match(name)
        if match is None:
            continue
        pid = int(match["pid"])
        if pid == os.getpid():
            if pid in previous:
                dead.append(name)
            continue
        if pid not in alive:
            alive[pid] = pid_alive(pid)
        if not alive[pid]:
            dead.append(name)
    return dead


OWNER_FILE = "owner"


@functools.cache
def here() -> str:
    """Where this process runs, as far as its pids mean anything: the boot and the pid namespace."""
    try:
        boot = boot_id()
    except OSError:
        boot = "unknown-boot"
    try:
        namespace = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        namespace = 0
    return f"{boot} {namespace}"


def _ran_here(path: Path) -> bool:
    try:
        return (path / OWNER_FILE).read_text() == here()
    except OSError:
        return False


def sandbox_dirs(root: Path) -> list[Path]:
    """The sandbox directories under `root`, live or left behind."""
    return [root / name for name in _listing(root) if _SANDBOX_NAME.match(name)]


def _listing(path: Path) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


def _cgroup_names() -> list[str]:
    return [name for parent in dict.fromkeys(writable_controllers().values()) for name in _listing(parent)]


def _dead_dirs(sandbox_root: Path, previous: set[int]) -> list[str]:
    """The names of the directories under `sandbox_root` a dead owner left here. The journal's
    previous owner is known dead wherever its pids were (a container restarted has a new pid
    namespace); any other owner must have run where this process runs."""
    return [
        name
        for name in dead_owners_names(_listing(sandbox_root), previous)
        if int(name.split("-", 1)[0]) in previous or _ran_here(sandbox_root / name)
    ]


def remove_dead_owners_leftovers(sandbox_root: Path, previous_pids: Iterable[int] = ()) -> Leftovers:
    """Remove the sandbox directories under `sandbox_root` and the cgroups of owners that are
    gone. Blocking (tree removal): run it off an event loop."""
    done = Leftovers()
    for name in _dead_dirs(sandbox_root, set(previous_pids)):
        path = sandbox_root / name
        if path.is_dir() and not path.is_symlink():
            try:
                shutil.rmtree(path)
                done.removed_dirs.append(name)
            except OSError as exc:
                logger.warning("could not remove a dead owner's sandbox %s: %s", path, exc)
    done.removed_cgroups = reap_orphan_cgroups()
    if done.removed_dirs or done.removed_cgroups:
        logger.info(
            "removed %d sandbox directories and %d cgroups of dead owners (sandbox root %s)",
            len(done.removed_dirs),
            len(done.removed_cgroups),
            sandbox_root,
        )
    return done


_lock = threading.Lock()
# The sandbox roots this process opened sandboxes under: what it removes of its own as it exits.
_roots_used: set[Path] = set()
_roots_lock = threading.Lock()
_last_reap: dict[Path, float] = {}


def reap_now_and_then(sandbox_root: Path) -> None:
    """At a sandbox's open: clean up after dead owners, unless this process looked for this root
    less than `REAP_INTERVAL_S` ago or another thread is looking now (opens never queue behind a
    clean-up). Looking is two directory listings and a liveness check per owner. The first open
    under a root also has this process remove its own sandboxes there when it exits."""
    if sandbox_root not in _roots_used:
        with _roots_lock:
            if not _roots_used:
                atexit.register(remove_own_leftovers)
            _roots_used.add(sandbox_root)
    now = time.monotonic()
    last = _last_reap.get(sandbox_root)
    if last is not None and now - last < REAP_INTERVAL_S:
        return
    if not _lock.acquire(blocking=False):
        return
    try:
        _last_reap[sandbox_root] = now
        if _dead_dirs(sandbox_root, set()) or dead_owners_names(_cgroup_names()):
            remove_dead_owners_leftovers(sandbox_root)
    finally:
        _lock.release()


def remove_own_leftovers() -> Leftovers:
    """Remove every sandbox directory and cgroup of this process's own, killing what is inside:
    run as it exits (`atexit`, after the sandbox threads have ended), when all of them should be
    closed already. A sandbox that is not was opened by a thread while the event loop that would
    have closed it ended (a rollout cancelled as its worker process shut down): without this it
    would stay until another process's next open noticed its owner gone."""
    done = Leftovers()
    mine = re.compile(rf"^{os.getpid()}-")
    for root in sorted(_roots_used):
        for name in _listing(root):
            path = root / name
            if _SANDBOX_NAME.match(name) and mine.match(name) and path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
                done.removed_dirs.append(name)
    done.removed_cgroups = remove_cgroups_of(os.getpid())
    if done.removed_dirs or done.removed_cgroups:
        logger.warning(
            "%d sandbox directories and %d cgroups of this process were still there as it exited: removed",
            len(done.removed_dirs),
            len(done.removed_cgroups),
        )
    return done
