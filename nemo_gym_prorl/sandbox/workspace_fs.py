# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Host-side file access under a sandbox workspace that never follows a symlink.

The host reads and writes workspace files for uploads, downloads and evaluation artifacts while
the policy's processes may still be running and renaming things. Checking a path first and
opening it afterwards leaves a window in which a directory can be swapped for a symlink to
`/etc`; opening each component relative to its parent with `O_NOFOLLOW` closes that window.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _owned_like_parent(fd: int, parent_fd: int) -> None:
    """What a root service writes into a sandbox's directories belongs to the sandbox's user
    (the directory's owner), who must be able to change it."""
    if os.geteuid() == 0:
        parent = os.fstat(parent_fd)
        os.fchown(fd, parent.st_uid, parent.st_gid)


class WorkspacePathError(OSError):
    """A component of the path is a symlink, or not a directory where one is needed."""


@contextlib.contextmanager
def open_dir(root: Path, parts: Sequence[str], *, create: bool = False) -> Iterator[int]:
    """A descriptor of `root/parts...`, reached without following any symlink."""
    fd = os.open(root, _DIR_FLAGS)
    try:
        for name in parts:
            if name in ("", ".", "..") or "/" in name:
                raise WorkspacePathError(errno.EINVAL, f"bad path component {name!r}")
            try:
                nxt = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                made = False
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, 0o755, dir_fd=fd)
                    made = True
                nxt = os.open(name, _DIR_FLAGS, dir_fd=fd)
                if made:
                    _owned_like_parent(nxt, fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise WorkspacePathError(
                        exc.errno, f"{name!r} is not a directory inside the workspace"
                    ) from None
                raise
            os.close(fd)
            fd = nxt
        yield fd
    finally:
        os.close(fd)


def read_no_follow(root: Path, parts: Sequence[str], max_bytes: int | None = None) -> bytes:
    if not parts:
        raise IsADirectoryError(str(root))
    with open_dir(root, parts[:-1]) as dfd:
        try:
            fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=dfd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise WorkspacePathError(exc.errno, f"{parts[-1]!r} is a symlink") from None
            raise
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):  # FIFOs and devices would block or leak
            raise WorkspacePathError(errno.EINVAL, f"{parts[-1]!r} is not a regular file")
        return f.read() if max_bytes is None else f.read(max_bytes)


def write_no_follow(root: Path, parts: Sequence[str], data: bytes) -> None:
    if not parts:
        raise IsADirectoryError(str(root))
    with open_dir(root, parts[:-1], create=True) as dfd:
        try:
            fd = os.open(parts[-1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
                         | os.O_NONBLOCK, 0o644, dir_fd=dfd)  # fmt: skip
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise WorkspacePathError(exc.errno, f"{parts[-1]!r} is a symlink") from None
            raise
        with os.fdopen(fd, "wb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise WorkspacePathError(errno.EINVAL, f"{parts[-1]!r} is not a regular file")
            _owned_like_parent(f.fileno(), dfd)
            f.write(data)
