# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""A bubblewrap sandbox whose namespaces outlive each process: what Gym's providers promise.

`BubblewrapSandbox` starts one `bwrap` per process, each with its own pid namespace, so a
`setsid daemon &` dies with the command that started it (the kernel kills a pid namespace with
its init). Gym's agents start servers in one exec and use them in the next. Here one long-lived
init (`bwrap --unshare-all ... sh` reading a pipe only we hold) owns the sandbox's user, pid,
network, IPC, UTS and cgroup namespaces, and every later process joins them:

    nsenter --user --net --ipc --uts --cgroup   (the init's namespaces, held open as fds here)
      bwrap --pidns 3 --cap-drop ALL ...         (a fresh mount namespace: the same binds, own /proc)

Why bwrap again rather than `nsenter --mount`: joining the user namespace grants every
capability in it, and a process that is uid 0 there keeps them across exec. With them it could
remount the read-only binds writable (the host's /usr, as the host's root) or unmount the
tmpfs over hidden test directories. bwrap drops them all before running the command, and needs
nothing inside the image to do it. Every mount namespace is built from the same binds, so all
processes see one filesystem; state lives in the workspace and /tmp host directories.

Processes that joined live in the init's pid namespace: a daemon survives its exec, and killing
the init (close) makes the kernel kill every one of them, with or without a pids cgroup.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import shutil
import time
from pathlib import Path

from nemo_gym_prorl.sandbox.base import SandboxError
from nemo_gym_prorl.sandbox.bubblewrap import BubblewrapSandbox
from nemo_gym_prorl.sandbox.spec import SandboxSpec

# ioctl(2) on a namespace fd: the user namespace that owns it (linux/nsfs.h).
NS_GET_USERNS = 0xB701
# Namespaces a process joins besides the pid namespace, which bwrap joins itself (`--pidns`)
# so that its `--proc` mounts a procfs of the sandbox's pids, not the host's.
_JOINED = ("net", "ipc", "uts", "cgroup")
# The init: blocks reading a pipe whose write end only the owner holds. POSIX sh, no binary of
# the image needed; if the owner dies the pipe closes and the init (and the sandbox) ends.
INIT_ARGV = ["/bin/sh", "-c", "while read -r _; do :; done"]
_POLL_S = 0.002


def _first_child(pid: int) -> int | None:
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return None
    return int(children[0]) if children else None


class PersistentBubblewrapSandbox(BubblewrapSandbox):
    """`BubblewrapSandbox` with one init per sandbox: `start()` it, then every `exec`, `spawn`
    and `spawn_pty` runs inside the init's namespaces. `close()` ends them all."""

    def __init__(self, spec: SandboxSpec) -> None:
        nsenter = shutil.which("nsenter")
        if nsenter is None:
            raise SandboxError("nsenter (util-linux) is not installed: it joins a sandbox's namespaces")
        self._nsenter = nsenter
        self._ns_fds: dict[str, int] = {}
        self._init: asyncio.subprocess.Process | None = None
        super().__init__(spec)

    @property
    def started(self) -> bool:
        return bool(self._ns_fds)

    @property
    def init_alive(self) -> bool:
        return self._init is not None and self._init.returncode is None

    async def start(self, timeout: float) -> None:
        """Start the init and wait until a joined process runs (or raise `SandboxError`)."""
        deadline = time.monotonic() + timeout
        self._init = await self.spawn(
            INIT_ARGV, stdin=True, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE
        )
        leader = await self._wait_for_leader(deadline)
        self._open_namespaces(leader)
        await self._wait_until_joinable(deadline)

    async def _wait_for_leader(self, deadline: float) -> int:
        """The init's pid-1 process: the first child of the outer bwrap, once it is in a new
        network namespace (created together with the others, by one clone)."""
        assert self._init is not None
        own_net = os.readlink("/proc/self/ns/net")
        while time.monotonic() < deadline:
            if self._init.returncode is not None:
                raise SandboxError(
                    f"sandbox init exited with {self._init.returncode}: {await self._init_stderr()}"
                )
            leader = _first_child(self._init.pid)
            with contextlib.suppress(OSError):
                if leader is not None and os.readlink(f"/proc/{leader}/ns/net") != own_net:
                    return leader
            await asyncio.sleep(_POLL_S)
        raise SandboxError("sandbox init did not start in time")

    def _open_namespaces(self, leader: int) -> None:
        """Hold the namespaces open by fd: a pid can be reused once the init is gone, an fd
        cannot be redirected. The user namespace is the one that owns the network namespace:
        unprivileged bwrap moves its own processes into a nested one afterwards, which does
        not own the others."""
        for kind in ("pid", *_JOINED):
            self._ns_fds[kind] = os.open(f"/proc/{leader}/ns/{kind}", os.O_RDONLY | os.O_CLOEXEC)
        self._ns_fds["user"] = fcntl.ioctl(self._ns_fds["net"], NS_GET_USERNS)
        os.set_inheritable(self._ns_fds["user"], False)

    async def _wait_until_joinable(self, deadline: float) -> None:
        # Until bwrap has written the user namespace's id maps, joining it fails: retry briefly.
        last = ""
        while time.monotonic() < deadline:
            result = await self.exec(["true"], timeout=max(0.1, deadline - time.monotonic()))
            if result.ok:
                return
            last = result.stderr.strip()
            if not self.init_alive:
                break
            await asyncio.sleep(_POLL_S)
        raise SandboxError(f"could not join the sandbox's namespaces: {last or await self._init_stderr()}")

    async def _init_stderr(self) -> str:
        if self._init is None or self._init.stderr is None or self._init.returncode is None:
            return ""
        return (await self._init.stderr.read(4096)).decode(errors="replace").strip()

    def _ns_path(self, kind: str) -> str:
        return f"/proc/{os.getpid()}/fd/{self._ns_fds[kind]}"

    def _isolate(self, argv: list[str], *, cwd: str, env: dict[str, str]) -> list[str]:
        if not self._ns_fds:  # the init itself
            return super()._isolate(argv, cwd=cwd, env=env)
        cmd = ["/bin/sh", "-c", 'exec 3<"$0" && exec "$@"', self._ns_path("pid"), self._nsenter]
        cmd += [f"--user={self._ns_path('user')}", *(f"--{kind}={self._ns_path(kind)}" for kind in _JOINED)]
        cmd += ["--preserve-credentials", "--", self._bwrap, "--pidns", "3", "--die-with-parent"]
        cmd += ["--cap-drop", "ALL", "--clearenv"]
        for key, value in env.items():
            cmd += ["--setenv", key, value]
        cmd += self._fs_args
        # fd 3 (the pid namespace) is bwrap's, not the command's: close it before running that.
        cmd += ["--chdir", cwd, "--", "/bin/sh", "-c", 'exec 3<&- && exec "$@"', "sh", *argv]
        return cmd

    def close(self) -> None:
        # Killing the init (pid 1 of the namespace) makes the kernel kill every process in it.
        try:
            super().close()
        finally:
            for fd in self._ns_fds.values():
                with contextlib.suppress(OSError):
                    os.close(fd)
            self._ns_fds.clear()
