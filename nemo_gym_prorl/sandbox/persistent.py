# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""A bubblewrap sandbox whose namespaces outlive each process, and other processes joining it.

`BubblewrapSandbox` starts one `bwrap` per process, each with its own pid namespace, so a
`setsid daemon &` dies with the command that started it (the kernel kills a pid namespace with
its init). Gym's agents start servers in one exec and use them in the next. Here one long-lived
init (`bwrap --unshare-all ... sh` reading a pipe only the owner holds) owns the sandbox's user,
pid, network, IPC, UTS and cgroup namespaces, and every later process joins them:

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

Two kinds share that recipe:

- `PersistentBubblewrapSandbox` (a spec's `backend=PERSISTENT_BACKEND`, this module's import
  target) owns the sandbox: it starts the init when built, and its `close()` ends everything in
  the sandbox and removes its directories.
- `JoinedBubblewrapSandbox` runs commands in a sandbox another process owns, from a `JoinGrant`
  the owner handed out (`join_registry.py`: a secret checked against the owner's registry of its
  live sandboxes, which alone says where the sandbox is and how it is mounted). Its `close()`
  ends only what it started itself and leaves the sandbox to its owner. Before joining it checks
  that the init is still the very process the registry names (pid and start time, in this
  boot), so a reused pid is never mistaken for the sandbox.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from nemo_gym_prorl.process_identity import boot_id, start_ticks
from nemo_gym_prorl.sandbox.base import LAUNCH_ENV, SandboxError
from nemo_gym_prorl.sandbox.bubblewrap import BubblewrapSandbox
from nemo_gym_prorl.sandbox.identity import drop_capabilities
from nemo_gym_prorl.sandbox.join_registry import JoinGrant, redeem, register, unregister
from nemo_gym_prorl.sandbox.launch import Launch, bwrap_launch
from nemo_gym_prorl.sandbox.limits import PidsCgroup
from nemo_gym_prorl.sandbox.spec import SandboxLimits, SandboxSpec
from nemo_gym_prorl.sandbox.waiting import readable, wait_for_exit

# ioctl(2) on a namespace fd: the user namespace that owns it (linux/nsfs.h).
NS_GET_USERNS = 0xB701
# Namespaces a process joins besides the pid namespace, which bwrap joins itself (`--pidns`)
# so that its `--proc` mounts a procfs of the sandbox's pids, not the host's.
_JOINED = ("net", "ipc", "uts", "cgroup")
# The init: says it runs, then blocks reading a pipe whose write end only the owner holds. POSIX
# sh, no binary of the image needed; if the owner dies the pipe closes and the init (and the
# sandbox) ends. Once it runs, bwrap has built every namespace and written the user namespace's
# id maps: the sandbox can be joined.
READY = b"ready\n"
INIT_ARGV = ["/bin/sh", "-c", "echo ready && exec >/dev/null && while read -r _; do :; done"]
DEFAULT_READY_TIMEOUT_S = 60.0
# What a `SandboxSpec` names as its backend to get a persistent sandbox from `open_sandbox`.
PERSISTENT_BACKEND = "nemo_gym_prorl.sandbox.persistent:PersistentBubblewrapSandbox"
_RETRY_S = 0.002
# bwrap's --die-with-parent (PR_SET_PDEATHSIG) fires when the *thread* that spawned it exits, not
# the process. A sandbox is often built in a worker thread (`asyncio.to_thread`) that may end
# long before the sandbox should: every init is spawned from this one thread, which lives as
# long as the process.
_INIT_SPAWNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="prorl-sandbox-init")
# Kinds of sandbox (started by root or not, rootfs) that a join has worked for in this process.
# Joining is tried once per kind, so that a host where it cannot work says why at the first
# open; after that the init's word that it runs is enough, and no sandbox pays for a trial.
_JOINS_WORKED: set[tuple[bool, str | None]] = set()


class SandboxGoneError(SandboxError):
    """The sandbox a ticket names is closed, or its init is another process now."""


def _first_child(pid: int) -> int | None:
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return None
    return int(children[0]) if children else None


def _find_nsenter() -> str:
    nsenter = shutil.which("nsenter", path="/usr/bin:/bin:/usr/sbin:/sbin")
    if nsenter is None:
        raise SandboxError("nsenter (util-linux) is not installed: it joins a sandbox's namespaces")
    return nsenter


class JoinTicket(BaseModel):
    """How to run commands in a live persistent sandbox: the owner's registry record (never read
    from a caller: see `join_registry`). It holds host paths and the sandbox's bwrap arguments,
    and works only on the same host (boot) for the same user."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["prorl-bubblewrap-persistent"] = "prorl-bubblewrap-persistent"
    version: Literal[1] = 1
    sandbox_id: str
    boot_id: str
    uid: int
    leader_pid: int = Field(gt=1, description="Host pid of the sandbox's init (pid 1 inside).")
    leader_start_ticks: int = Field(ge=0, description="Its start time: guards against pid reuse.")
    net_ns: str = Field(description="Its network namespace, as /proc/<pid>/ns/net reads.")
    workspace: Path = Field(description="Host directory of the workspace.")
    tmp_dir: Path = Field(description="Host directory behind /tmp inside.")
    workspace_mount: str
    env: dict[str, str] = Field(description="Every command's environment, before its own env.")
    fs_args: list[str] = Field(description="The sandbox's bwrap filesystem arguments, verbatim.")
    limits: SandboxLimits
    cgroup: Path | None = Field(description="The sandbox's pids cgroup, which joined processes enter too.")
    python: str = Field(description="The Python interpreter to run inside.")


class NamespaceBubblewrapSandbox(BubblewrapSandbox):
    """What owner and borrower share: every process joins the namespaces held open as fds."""

    backend = "bubblewrap_persistent"  # names its directories and cgroups; not a registered name

    def __init__(self, spec: SandboxSpec) -> None:
        self._nsenter = _find_nsenter()
        self._ns_fds: dict[str, int] = {}
        self._ticket: JoinTicket | None = None
        self._grant: JoinGrant | None = None
        super().__init__(spec)

    @property
    def started(self) -> bool:
        return bool(self._ns_fds)

    @property
    def init_alive(self) -> bool:
        raise NotImplementedError

    def join_ticket(self) -> JoinTicket:
        """The owner's record of how to join this sandbox (what its registry entry holds)."""
        self._check_open()
        if self._ticket is None:
            raise SandboxError(f"sandbox {self.id} has not started")
        return self._ticket

    def join_grant(self) -> JoinGrant:
        """What another process joins this sandbox with (`JoinedBubblewrapSandbox`)."""
        self.join_ticket()
        assert self._grant is not None
        return self._grant

    def _open_namespaces(self, leader: int) -> None:
        """Hold the namespaces open by fd: a pid can be reused once the init is gone, an fd
        cannot be redirected. The user namespace is the one that owns the network namespace:
        unprivileged bwrap moves its own processes into a nested one afterwards, which does
        not own the others."""
        for kind in ("pid", *_JOINED):
            self._ns_fds[kind] = os.open(f"/proc/{leader}/ns/{kind}", os.O_RDONLY | os.O_CLOEXEC)
        self._ns_fds["user"] = fcntl.ioctl(self._ns_fds["net"], NS_GET_USERNS)
        os.set_inheritable(self._ns_fds["user"], False)

    def _close_namespaces(self) -> None:
        # Each descriptor taken out before it is closed (popitem is atomic): a close racing
        # another in a second thread never closes a number twice, which could be reused by then.
        while True:
            try:
                _, fd = self._ns_fds.popitem()
            except KeyError:
                return
            with contextlib.suppress(OSError):
                os.close(fd)

    def _ns_path(self, kind: str) -> str:
        return f"/proc/{os.getpid()}/fd/{self._ns_fds[kind]}"

    def _isolate(self, argv: list[str], *, cwd: str, env: dict[str, str]) -> Launch:
        if not self._ns_fds:  # the init itself
            return super()._isolate(argv, cwd=cwd, env=env)
        # fd 3 (the pid namespace) is bwrap's, not the command's: closed before running that.
        inner = ["/bin/sh", "-c", 'exec 3<&- && exec "$@"', "sh", *argv]
        options = ["--pidns", "3", "--die-with-parent"]
        if self.identity is None:
            # Joining the init's user namespace makes this process its root (this user on the
            # host), with every capability in it: bwrap keeps only what empties the bounding
            # set, and setpriv empties every set before the command, for good.
            options += ["--cap-drop", "ALL", "--cap-add", "CAP_SETPCAP"]
            inner = [*drop_capabilities(), *inner]
        launch = bwrap_launch(self._bwrap, inner, options=options, fs_args=self._fs_args, env=env, cwd=cwd,
                              identity=self.identity)  # fmt: skip
        enter = [self._nsenter]
        if self.identity is None:  # a root service's sandbox has no user namespace of its own
            enter += [f"--user={self._ns_path('user')}", "--preserve-credentials"]
        enter += [*(f"--{kind}={self._ns_path(kind)}" for kind in _JOINED), "--"]
        return launch.wrap(["/bin/sh", "-c", 'exec 3<"$0" && exec "$@"', self._ns_path("pid"), *enter])

    def _run_quick(self, argv: list[str], timeout: float) -> subprocess.CompletedProcess[bytes]:
        """A short command inside, run to completion from any thread (no event loop needed)."""
        with self.command(argv) as launch:
            return subprocess.run(
                launch.argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout,
                cwd=self._dir, env=LAUNCH_ENV, start_new_session=True, check=False, pass_fds=launch.fds,
            )  # fmt: skip

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._close_namespaces()


class PersistentBubblewrapSandbox(NamespaceBubblewrapSandbox):
    """`BubblewrapSandbox` with one init per sandbox, started when it is built; every `exec`,
    `spawn` and `spawn_pty` runs inside the init's namespaces. `close()` ends them all."""

    def __init__(self, spec: SandboxSpec, *, ready_timeout_s: float = DEFAULT_READY_TIMEOUT_S) -> None:
        self._init: subprocess.Popen[bytes] | None = None
        super().__init__(spec)
        try:
            self._start(ready_timeout_s)
        except BaseException:
            self.close()
            raise

    @property
    def init_alive(self) -> bool:
        return self._init is not None and self._init.poll() is None

    def _start(self, timeout: float) -> None:
        """Start the init and wait until a joined process runs (or raise `SandboxError`).
        Blocking, like Apptainer's instance start: async callers run it in a thread."""
        deadline = time.monotonic() + timeout
        # A plain Popen, not an asyncio process: the sandbox may be built in a worker thread
        # (`open_workspace`), and the init must not belong to that thread's event loop.
        with self.command(INIT_ARGV) as launch:
            self._init = _INIT_SPAWNER.submit(
                subprocess.Popen, launch.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, start_new_session=True, cwd=self._dir, env=LAUNCH_ENV,
                pass_fds=launch.fds,
            ).result()  # fmt: skip
        self._processes.append(self._init)  # type: ignore[arg-type]  (killed by group, like the rest)
        leader = self._wait_until_running(deadline)
        self._open_namespaces(leader)
        kind = (self.identity is None, None if self.spec.image is None else str(self.spec.image))
        if kind not in _JOINS_WORKED:
            self._wait_until_joinable(deadline)
            _JOINS_WORKED.add(kind)
        self._ticket = self._make_ticket(leader)
        self._grant = register(self.id, self._ticket)

    def _wait_until_running(self, deadline: float) -> int:
        """The init's pid-1 process (the first child of the outer bwrap), once the init says it
        runs: one wait on its stdout, not a poll (`waiting`)."""
        assert self._init is not None and self._init.stdout is not None
        out = self._init.stdout
        try:
            if not readable([out.fileno()], deadline - time.monotonic()):
                raise SandboxError("sandbox init did not start in time")
            said = os.read(out.fileno(), len(READY))
        finally:
            out.close()
        if said != READY:  # end of file: bwrap, or the init, ended first
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._init.wait(max(0.1, deadline - time.monotonic()))
            raise SandboxError(f"sandbox init exited with {self._init.returncode}: {self._init_stderr()}")
        leader = _first_child(self._init.pid)
        if leader is None:
            raise SandboxError(f"sandbox init exited while starting: {self._init_stderr()}")
        return leader

    def _wait_until_joinable(self, deadline: float) -> None:
        # Until bwrap has written the user namespace's id maps, joining it fails: retry briefly.
        last = ""
        while time.monotonic() < deadline:
            try:
                result = self._run_quick(["true"], timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                break
            if result.returncode == 0:
                return
            last = result.stderr.decode(errors="replace").strip()
            if not self.init_alive:
                break
            time.sleep(_RETRY_S)
        raise SandboxError(f"could not join the sandbox's namespaces: {last or self._init_stderr()}")

    def _wait_for_exits(self) -> None:
        """Until the init and the namespace's pid 1 have exited (pid 1 outlives bwrap's outer
        process until the kernel has reaped every other process of the namespace): then the
        cgroup is empty, and a joiner asking now finds the sandbox closed. Two waits on pidfds,
        not a poll."""
        deadline = time.monotonic() + 5
        if self._init is not None:
            init = self._init
            if wait_for_exit(init.pid, 5, still_it=lambda: init.poll() is None):
                init.poll()  # reap it
        ticket = self._ticket
        if ticket is not None:
            wait_for_exit(ticket.leader_pid, max(0.0, deadline - time.monotonic()),
                          still_it=lambda: start_ticks(ticket.leader_pid, exiting=True) == ticket.leader_start_ticks)  # fmt: skip

    def _init_stderr(self) -> str:
        if self._init is None or self._init.stderr is None or self._init.poll() is None:
            return ""
        return self._init.stderr.read(4096).decode(errors="replace").strip()

    def _make_ticket(self, leader: int) -> JoinTicket:
        ticks = start_ticks(leader)
        if ticks is None:
            raise SandboxError("sandbox init exited while starting")
        return JoinTicket(
            sandbox_id=self.id, boot_id=boot_id(), uid=os.getuid(), leader_pid=leader,
            leader_start_ticks=ticks, net_ns=os.readlink(f"/proc/{leader}/ns/net"),
            workspace=self.workspace, tmp_dir=self.tmp_dir, workspace_mount=self.spec.workspace_mount,
            env={**self.base_env(), **self.spec.env}, fs_args=list(self._fs_args),
            limits=self.spec.limits, cgroup=self.cgroup_path, python=self.python,
        )  # fmt: skip

    def close(self) -> None:
        # Killing the init (pid 1 of the namespace) makes the kernel kill every process in it,
        # a borrower's included; then the directories go. No grant joins it from now on.
        if self._grant is not None:
            unregister(self.id)
        try:
            super().close()
        finally:
            if self._init is not None:
                with contextlib.suppress(subprocess.TimeoutExpired, OSError):
                    self._init.wait(5)  # reaped by `_wait_for_exits` already, unless close failed early
                for pipe in (self._init.stdout, self._init.stderr, self._init.stdin):
                    if pipe is not None:
                        with contextlib.suppress(OSError):
                            pipe.close()


def check_ticket(ticket: JoinTicket) -> None:
    """Refuse a ticket whose sandbox is not this host's live sandbox, saying why."""
    if ticket.boot_id != boot_id():
        raise SandboxGoneError(f"sandbox {ticket.sandbox_id} is not on this host (or this boot)")
    if ticket.uid != os.getuid():
        raise SandboxGoneError(
            f"sandbox {ticket.sandbox_id} belongs to uid {ticket.uid}; only that user can join it"
        )
    if start_ticks(ticket.leader_pid) != ticket.leader_start_ticks:
        raise SandboxGoneError(
            f"sandbox {ticket.sandbox_id} is closed: its init (pid {ticket.leader_pid}) has exited"
        )
    with contextlib.suppress(OSError):
        if os.readlink(f"/proc/{ticket.leader_pid}/ns/net") == ticket.net_ns:
            return
    raise SandboxGoneError(f"sandbox {ticket.sandbox_id}: pid {ticket.leader_pid} is not its init")


class JoinedBubblewrapSandbox(NamespaceBubblewrapSandbox):
    """A live persistent sandbox of another process (or of this one), joined from its ticket.

    Commands, files and terminals work as in the owner's; `close()` ends only the processes
    this object started (a daemon they detached lives on in the sandbox) and never the
    sandbox: only the owner closes that. Once the owner has closed it, every use raises
    `SandboxGoneError`."""

    def __init__(self, grant: JoinGrant, *, root_dir: Path | None = None) -> None:
        ticket = JoinTicket.model_validate(redeem(grant))
        check_ticket(ticket)
        if not ticket.workspace.is_dir() or not ticket.tmp_dir.is_dir():
            raise SandboxGoneError(f"sandbox {ticket.sandbox_id} is closed: its directories are gone")
        spec = SandboxSpec(
            backend=PERSISTENT_BACKEND, workspace=ticket.workspace, workspace_mount=ticket.workspace_mount,
            env=ticket.env, limits=ticket.limits, python_runtime="none", root_dir=root_dir,
        )  # fmt: skip
        # Set before the base builds the filesystem arguments: they are the owner's, verbatim.
        self._joined = ticket
        self._scratch_tmp: Path | None = None
        super().__init__(spec)
        self._ticket = ticket
        self._grant = grant
        # This object's own directory (host cwd of its processes, its pids cgroup's name) is
        # scratch; /tmp inside is the owner's.
        self._scratch_tmp, self.tmp_dir = self.tmp_dir, ticket.tmp_dir
        self.id = ticket.sandbox_id
        self._use_owners_cgroup(ticket.cgroup)
        try:
            self._open_namespaces(ticket.leader_pid)
            # Opened by pid: check again that the pid was still the init when the fds were taken.
            check_ticket(ticket)
        except BaseException:
            self.close()
            raise

    def _filesystem_args(self) -> list[str]:
        return list(self._joined.fs_args)

    def _use_owners_cgroup(self, path: Path | None) -> None:
        """Processes started here enter the owner's pids cgroup, not one of this object's: they
        share the sandbox's process limit, and closing this object (which removes its own
        cgroup, killing every member) would kill the daemons they detached."""
        if self._cgroup is not None:
            self._cgroup.remove()  # this object's own, still empty
        self._cgroup = None
        if path is not None:
            owners = PidsCgroup.__new__(PidsCgroup)  # an existing group: nothing to create
            owners.path = path
            self._cgroup = owners

    @property
    def python(self) -> str:
        return self._joined.python

    @property
    def init_alive(self) -> bool:
        return start_ticks(self._joined.leader_pid) == self._joined.leader_start_ticks

    def _check_open(self) -> None:
        super()._check_open()
        if not self.init_alive:
            raise SandboxGoneError(f"sandbox {self.id} was closed by its owner")

    def close(self) -> None:
        # The base removes `tmp_dir` of a sandbox that does not own its workspace: point it back
        # at this object's scratch directory, never at the owner's /tmp.
        if self._scratch_tmp is not None:
            self.tmp_dir = self._scratch_tmp
            # Likewise the cgroup: the owner's, which only the owner's close removes.
            self._cgroup = None
        super().close()
