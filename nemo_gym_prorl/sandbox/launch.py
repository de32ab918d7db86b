# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The one builder of a bubblewrap command line: every sandbox and harness process starts here.

What it guarantees, whoever runs the service:

- **No host detail on a command line inside.** A sandbox's processes can read the command line
  of every process in their pid namespace, bubblewrap's own included (it is pid 1). So all of
  bubblewrap's options (the binds, with their host paths; the environment; the working
  directory) travel in a memory file it reads with `--args FD`; its command line says only
  `bwrap --args N --seccomp M -- <command>`. bubblewrap itself is started with an empty
  environment: pid 1's environment holds nothing of the host's.
- **A syscall filter** (`seccomp.py`), loaded by bubblewrap (`--seccomp FD`) just before the
  command, so its own set-up runs unfiltered and everything the command starts is filtered.
- **Never root, never a capability.** Started by an unprivileged user, bubblewrap makes a user
  namespace in which that user is the only one and drops every capability. Started by root, it
  makes no user namespace (root's would map the sandbox to host uid 0): the command starts
  through `setpriv` as the sandboxes' host identity (`identity.py`), with every capability set
  empty and `no_new_privs`.

A `Launch` owns the file descriptors the command needs; the spawner passes them (`pass_fds`)
and closes its copies once the child runs (bubblewrap closes its own after reading them).
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Self

from nemo_gym_prorl.sandbox.identity import ROOT_LAUNCH_CAPS, HostIdentity
from nemo_gym_prorl.sandbox.seccomp import filter_fd

# Namespaces of an unprivileged sandbox: all of them, the user namespace first.
UNPRIVILEGED_NAMESPACES = ("--unshare-all",)
# Started by root: every namespace but the user namespace (see the module's docstring).
ROOT_NAMESPACES = ("--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try")


@dataclass
class Launch:
    """A host command and the descriptors it must inherit. Use as a context manager around the
    spawn: leaving it closes this process's copies of the descriptors."""

    argv: list[str]
    fds: tuple[int, ...] = ()
    bwrap_args: list[str] = field(default_factory=list)  # what `--args` carries, for inspection

    def wrap(self, prefix: Sequence[str]) -> Launch:
        """The same launch, started through `prefix` (which execs the rest)."""
        return Launch([*prefix, *self.argv], self.fds, self.bwrap_args)

    def close(self) -> None:
        for fd in self.fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.fds = ()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def find_bwrap() -> str | None:
    return shutil.which("bwrap", path="/usr/bin:/bin:/usr/local/bin:" + os.environ.get("PATH", ""))


def namespace_options(identity: HostIdentity | None, *, network: bool) -> list[str]:
    """bubblewrap's namespace options for a new sandbox (network: share the host's)."""
    options = list(ROOT_NAMESPACES if identity is not None else UNPRIVILEGED_NAMESPACES)
    if network:
        if identity is not None:
            options.remove("--unshare-net")
        else:
            options.append("--share-net")
    return options


def capability_options(identity: HostIdentity | None) -> list[str]:
    """Root's bubblewrap keeps only what `setpriv` needs to drop root (it clears them all
    before the command runs); an unprivileged bubblewrap keeps none by itself."""
    if identity is None:
        return []
    options = ["--cap-drop", "ALL"]
    for cap in ROOT_LAUNCH_CAPS:
        options += ["--cap-add", cap]
    return options


# bubblewrap's filesystem operations and how many arguments each takes (the last is where).
_FS_OPERATIONS = {"--proc": 1, "--dev": 1, "--tmpfs": 1, "--dir": 1, "--bind": 2, "--ro-bind": 2,
                  "--dev-bind": 2, "--symlink": 2, "--perms": 1}  # fmt: skip
# Mounts whose own tree holds whatever lies below them (nothing can be made there).
_FIXED_TREES = {"--proc", "--dev", "--ro-bind", "--dev-bind", "--symlink"}


def with_parent_dirs(fs_args: Sequence[str]) -> list[str]:
    """`fs_args` with every directory bubblewrap would make on its own to hold a mount point
    (`/opt` for `/opt/prorl-runtime`) made explicitly, traversable: the ones it makes itself are
    0700 root's when root runs it, which the sandbox's user could not enter. Inside a read-only
    mount, the mounted tree's own directories apply; inside a writable one (the sandbox's /tmp)
    they are made writable by all, sticky, as /tmp itself is, since root owns them."""
    out: list[str] = []
    fixed: set[str] = set()
    writable: set[str] = set()
    made: set[str] = set()
    i = 0
    while i < len(fs_args):
        op = fs_args[i]
        arity = _FS_OPERATIONS.get(op)
        if arity is None:
            raise ValueError(f"not a bubblewrap filesystem operation: {op!r}")
        operands = list(fs_args[i + 1 : i + 1 + arity])
        i += 1 + arity
        if op == "--perms":
            out += [op, *operands]
            continue
        dest = operands[-1].rstrip("/") or "/"
        parts = [p for p in dest.split("/") if p]
        inside_writable = False
        for depth in range(1, len(parts)):
            ancestor = "/" + "/".join(parts[:depth])
            if ancestor in fixed:
                break
            inside_writable = inside_writable or ancestor in writable
            if ancestor not in made and ancestor not in writable:
                out += ["--perms", "1777" if inside_writable else "0755", "--dir", ancestor]
                made.add(ancestor)
        out += [op, *operands]
        if op in _FIXED_TREES:
            fixed.add(dest)
        elif op in ("--bind", "--tmpfs"):
            writable.add(dest)
        else:
            made.add(dest)
    return out


def _memory_file(name: str, data: bytes) -> int:
    fd = os.memfd_create(name, os.MFD_CLOEXEC)
    try:
        os.write(fd, data)
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd


def bwrap_launch(
    bwrap: str,
    argv: Sequence[str],
    *,
    options: Sequence[str],
    fs_args: Sequence[str],
    env: Mapping[str, str],
    cwd: str,
    identity: HostIdentity | None,
    seccomp_allows: frozenset[str] = frozenset(),
) -> Launch:
    """bubblewrap running `argv` with `options` (namespaces, `--die-with-parent`, ...), the
    filesystem `fs_args`, exactly `env` and `cwd`, under the filter (but `seccomp_allows`, for
    a process that filters its children itself), as `identity` (None: as this unprivileged
    process's user)."""
    hidden = [*options, *capability_options(identity), "--clearenv"]
    for key, value in env.items():
        hidden += ["--setenv", key, value]
    hidden += [*fs_args, "--chdir", cwd]
    for arg in hidden:
        if "\0" in arg:
            raise ValueError(f"a bubblewrap argument holds a NUL byte: {arg!r}")
    args_fd = _memory_file("prorl-bwrap-args", b"".join(arg.encode() + b"\0" for arg in hidden))
    try:
        seccomp_fd = filter_fd(seccomp_allows)
    except BaseException:
        os.close(args_fd)
        raise
    # bubblewrap reads both before it runs anything: inheritable for the exec, closed by it.
    for fd in (args_fd, seccomp_fd):
        os.set_inheritable(fd, True)
    drop = identity.setpriv() if identity is not None else []
    command = [bwrap, "--args", str(args_fd), "--seccomp", str(seccomp_fd), "--", *drop, *argv]
    return Launch(command, (args_fd, seccomp_fd), hidden)
