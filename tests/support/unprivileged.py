# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Run a command as an unprivileged host user, from a root test session, for tests of what an
unprivileged service does (its sandboxes are its own user, in a user namespace of bubblewrap's).

    python -m support.unprivileged --uid 64123 --reach PATH [--reach PATH ...] -- argv...

It needs the project's interpreter, venv, checkout and sandbox runtime, which a root session
keeps under directories no other user may enter (/root, a `mktemp -d` checkout or PRORL_HOME).
So, as root, in a mount namespace of its own (the host's mounts are untouched): each directory
on the way to a `--reach` path that others cannot traverse is covered by a tmpfs that holds only
the entries on those ways, bound back from the real ones; then it becomes the user (no
supplementary group, no capability) and execs the command. Nothing outside the command's mount
namespace changes, and the files it reaches keep their own modes.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import stat
import sys
import tempfile
from pathlib import Path

MS_BIND, MS_REC, MS_PRIVATE, MS_MOVE = 0x1000, 0x4000, 1 << 18, 0x2000


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    code = libc.mount(
        None if source is None else source.encode(), target.encode(),
        None if fstype is None else fstype.encode(), ctypes.c_ulong(flags),
        None if data is None else data.encode(),
    )  # fmt: skip
    if code != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {source} -> {target}: {os.strerror(err)}")


def _closed_ancestor(path: Path) -> tuple[Path, str] | None:
    """The first directory on the way to `path` that others cannot traverse, and the entry
    under it on that way."""
    for parent in [*reversed(path.parents)]:
        if parent == path:
            break
        mode = os.stat(parent).st_mode
        if not mode & stat.S_IXOTH:
            child = path.relative_to(parent).parts[0]
            return parent, child
    return None


def open_the_ways(paths: list[Path]) -> None:
    """Make every path reachable by others in this (private) mount namespace."""
    stash = Path(tempfile.mkdtemp(prefix="prorl-unprivileged-"))
    stash.chmod(0o755)
    while True:
        closed: dict[Path, set[str]] = {}
        for path in paths:
            found = _closed_ancestor(path)
            if found is not None:
                closed.setdefault(found[0], set()).add(found[1])
        if not closed:
            break
        directory = min(closed, key=lambda d: len(d.parts))  # the shallowest first
        kept = []
        for index, name in enumerate(sorted(closed[directory])):
            hold = stash / f"{len(list(stash.iterdir()))}-{index}"
            hold.mkdir()
            _mount(str(directory / name), str(hold), None, MS_BIND | MS_REC)
            kept.append((name, hold))
        _mount("tmpfs", str(directory), "tmpfs", 0, "mode=0755")
        for name, hold in kept:
            (directory / name).mkdir()
            _mount(str(hold), str(directory / name), None, MS_MOVE)
    for path in paths:  # the ways are open; each place reached must be enterable itself
        mode = os.stat(path).st_mode
        if not mode & stat.S_IXOTH:
            raise SystemExit(f"{path} is closed to other users (mode {oct(mode)}): reach what is inside it")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--uid", type=int, required=True)
    parser.add_argument("--reach", type=Path, action="append", default=[])
    parser.add_argument("argv", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    argv = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    cwd = os.getcwd()
    os.unshare(os.CLONE_NEWNS)
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    open_the_ways([p.resolve() for p in [*args.reach, Path(cwd)]])
    os.chdir(cwd)  # through the new mounts
    os.setgroups([])
    os.setresgid(args.uid, args.uid, args.uid)
    os.setresuid(args.uid, args.uid, args.uid)
    os.execvpe(argv[0], argv, os.environ)
    return 1  # not reached


if __name__ == "__main__":
    sys.exit(main())
