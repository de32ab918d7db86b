# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The one `Sandbox` interface every backend implements, and the process bookkeeping they share.

A sandbox is a workspace directory plus a recipe (`command`) that turns an argv into a host
command running that argv isolated. Every process started through it lives in its own process
group and is tracked, so `close()` kills exactly what this sandbox started and nothing else.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any, Self

from pydantic import BaseModel

from nemo_gym_prorl.latency import SANDBOX_CLOSE
from nemo_gym_prorl.sandbox.identity import (
    HostIdentity,
    SandboxIdentityError,
    nice_prefix,
    sandbox_identity,
    system_program,
)
from nemo_gym_prorl.sandbox.launch import Launch
from nemo_gym_prorl.sandbox.leftovers import OWNER_FILE, here, reap_now_and_then
from nemo_gym_prorl.sandbox.limits import (
    PidsCgroup,
    process_limit_binds,
    wrap_with_rlimits,
)
from nemo_gym_prorl.sandbox.output import CappedBuffer
from nemo_gym_prorl.sandbox.process import SandboxProcess
from nemo_gym_prorl.sandbox.runtime import RuntimeSetupError, installed_runtime
from nemo_gym_prorl.sandbox.spec import SandboxSpec
from nemo_gym_prorl.sandbox.terminal import TerminalProcess
from nemo_gym_prorl.sandbox.threads import in_sandbox_thread
from nemo_gym_prorl.sandbox.workspace_fs import read_no_follow, write_no_follow

logger = logging.getLogger(__name__)


class SandboxError(RuntimeError):
    """A sandbox could not be created or used (missing binary, closed, bad path)."""


class SandboxPathError(SandboxError, ValueError):
    """A path that resolves outside the sandbox workspace."""


class ExecResult(BaseModel):
    exit_code: int
    stdout: str
    stderr: str
    timed_out: bool = False
    truncated: bool = False
    duration_s: float

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


# The environment of the host-side launcher (bubblewrap, Apptainer): every program is named by its
# absolute path, and bubblewrap is pid 1 in the sandbox, where its environment can be read.
LAUNCH_ENV: dict[str, str] = {}


def default_sandbox_root() -> Path:
    return Path(os.environ.get("PRORL_SANDBOX_ROOT") or Path(tempfile.gettempdir()) / "prorl-sandboxes")


def project_runtime_binds() -> list[tuple[Path, str]]:
    """(host path, path inside) pairs that make this project's interpreter and its venv run in
    a sandbox (`python_runtime="project"`: trusted graders only, never policy code). The venv
    appears both at its real path and at the path it was reached by, since `sys.executable`
    keeps the unresolved one (NeMo Gym links each server's `.venv` to a shared venv)."""
    binds: dict[str, Path] = {}
    for prefix in (Path(sys.base_prefix), Path(sys.prefix)):
        real = prefix.resolve()
        binds[str(real)] = real
        binds[str(prefix.absolute())] = real
    return [(source, target) for target, source in sorted(binds.items())]


class PythonSetup(BaseModel):
    """How a spec's `python_runtime` appears inside: what to bind, what goes first on PATH,
    and the interpreter to run."""

    binds: list[tuple[Path, str]]
    path_dirs: list[str]
    python: str


def python_setup(spec: SandboxSpec) -> PythonSetup:
    if spec.python_runtime == "sandbox":
        try:
            runtime = installed_runtime()
        except RuntimeSetupError as exc:
            raise SandboxError(str(exc)) from None
        return PythonSetup(binds=runtime.binds(), path_dirs=[str(Path(runtime.python).parent)],
                           python=runtime.python)  # fmt: skip
    if spec.python_runtime == "project":
        bin_dir = Path(sys.prefix).resolve() / "bin"
        return PythonSetup(binds=project_runtime_binds(), path_dirs=[str(bin_dir)], python=sys.executable)
    return PythonSetup(binds=[], path_dirs=[], python="python3")


def make_private_dirs(root: Path, own: Path) -> None:
    """The sandbox root (traversable, not listable, when this call makes it) and a sandbox's
    own host directory, closed to every other host user: nobody needs to traverse it but this
    process (bubblewrap binds what is inside; the sandbox's user sees only the binds)."""
    if not root.is_dir():
        root.mkdir(parents=True, exist_ok=True, mode=0o711)
    own.mkdir(mode=0o700)
    own.chmod(0o700)  # whatever the umask


def run_host_tool(name: str, *args: str) -> None:
    """Run a system tool (coreutils `cp`, `chown`, `rm`) on the host and wait for it; SandboxError
    with what it said when it fails. A repository's tree is walked by the tool, not by Python in
    a sandbox thread: a thread walking thousands of files in Python takes the interpreter lock
    from the event loop that drives every rollout, a few milliseconds at a time."""
    program = system_program(name)
    if program is None:
        raise SandboxError(f"{name} (coreutils) is not installed on the host")
    done = subprocess.run([program, *args], capture_output=True, text=True, errors="replace", check=False)
    if done.returncode != 0:
        raise SandboxError(f"{name} failed (exit {done.returncode}): {done.stderr.strip()[-2000:]}")


def remove_tree(path: Path) -> None:
    """Remove a sandbox's directory tree (a SWE repository's copy, for one), never crossing into
    another file system; what cannot be removed is logged and left for the next start's sweep."""
    try:
        run_host_tool("rm", "-rf", "--one-file-system", "--", str(path))
    except SandboxError as exc:
        logger.warning("could not remove %s: %s", path, exc)


class Sandbox(ABC):
    """An isolated place to run processes against one workspace directory.

    Use as a (sync or async) context manager; `close()` is idempotent.
    """

    backend: str = "abstract"

    def __init__(self, spec: SandboxSpec) -> None:
        self.spec = spec
        self.id = uuid.uuid4().hex[:12]
        self.identity = self._host_identity()
        root = spec.root_dir or default_sandbox_root()
        # Named for its owner, as its cgroups are, so a dead owner's leftovers are known by name;
        # short, as IPython's Unix sockets live below it (a path of at most 100 characters).
        self._dir = root / f"{os.getpid()}-{self.id}"
        self._owns_workspace = spec.workspace is None
        self._closed = False
        self._processes: list[SandboxProcess | TerminalProcess] = []
        self._cgroup: PidsCgroup | None = None
        self.workspace: Path = (spec.workspace or self._dir / "workspace").resolve()
        self.tmp_dir = self._dir / "tmp"  # /tmp inside, shared by this sandbox's processes only
        try:
            make_private_dirs(root, self._dir)
            (self._dir / OWNER_FILE).write_text(here())
            if not self._owns_workspace and not self._is_given(self.workspace):
                self.hand_over(self.workspace)  # a directory of the service's: the sandbox's now
            for owned in (self.workspace, self.tmp_dir):
                owned.mkdir(parents=True, exist_ok=True)
                self._give(owned)
                owned.chmod(0o700)
            self.python_setup = python_setup(spec)
            reap_now_and_then(root)  # what killed owners left: cgroups, directories
            self._cgroup = PidsCgroup.create(f"{os.getpid()}-{self.backend}-{self.id}", spec.limits)
            if not process_limit_binds(spec.limits, self._cgroup, self.identity):
                raise SandboxError(
                    "refusing to start a sandbox without a process limit: running as root, where "
                    "RLIMIT_NPROC does not bind, and no pids cgroup is writable (cgroup v1 "
                    "/sys/fs/cgroup/pids or a delegated v2 subtree with the pids controller). Run as "
                    "an unprivileged user, delegate a cgroup to this process, or accept the risk "
                    "explicitly with limits.accept_no_process_limit=true"
                )
        except BaseException:
            self.close()
            raise

    def _host_identity(self) -> HostIdentity | None:
        """Who this sandbox's processes are on the host (None: this process's own user, which is
        not root). Backends that cannot drop root themselves use `sandbox_identity()`."""
        try:
            return sandbox_identity()
        except SandboxIdentityError as exc:
            raise SandboxError(str(exc)) from None

    def _give(self, path: Path) -> None:
        if self.identity is not None:
            self.identity.chown(path)

    def _is_given(self, path: Path) -> bool:
        """Whether `path` is the sandbox user's already (a joined sandbox's workspace, its
        owner's, is: not walked again)."""
        return self.identity is None or (path.exists() and path.stat().st_uid == self.identity.uid)

    def hand_over(self, path: Path) -> None:
        """Make `path` and everything under it the sandbox's own (a root service copies a
        repository in as root; the policy must be able to edit it). Symlinks are not followed."""
        if self.identity is not None:
            run_host_tool(
                "chown", "-R", "--no-dereference", f"{self.identity.uid}:{self.identity.gid}", str(path)
            )

    def copy_into_workspace(self, source: Path) -> None:
        """Copy a directory tree into the workspace (symlinks as symlinks), owned by the sandbox."""
        run_host_tool(
            "cp", "-R", "--no-dereference", "--preserve=mode,timestamps", "--reflink=auto",
            "--", f"{source}/.", str(self.workspace),
        )  # fmt: skip
        self.hand_over(self.workspace)

    def empty_dir(self) -> Path:
        """An empty, read-only host directory of this sandbox's own (removed on close)."""
        empty = self._dir / "empty"
        if not empty.exists():
            empty.mkdir()
            empty.chmod(0o555)
        return empty

    @property
    def python(self) -> str:
        """The Python interpreter to run inside this sandbox (see `SandboxSpec.python_runtime`)."""
        return self.python_setup.python

    # -- the one thing a backend must define -------------------------------------------------
    @abstractmethod
    def _isolate(self, argv: list[str], *, cwd: str, env: dict[str, str]) -> Launch:
        """The host command that runs `argv` inside the sandbox with exactly `env` and `cwd`."""

    # -- building commands --------------------------------------------------------------------
    def base_env(self) -> dict[str, str]:
        path = ":".join(
            [*self.python_setup.path_dirs, "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]
        )
        return {
            "PATH": path,
            "HOME": self.spec.workspace_mount,
            "LANG": "C.UTF-8",
            "TERM": "dumb",
            "TMPDIR": "/tmp",
            # Caches and config that tools write under $HOME (fontconfig, matplotlib, pip) would
            # otherwise land in the workspace and, for SWE, in the task's diff.
            "XDG_CACHE_HOME": "/tmp/.cache",
            "XDG_CONFIG_HOME": "/tmp/.config",
            "MPLCONFIGDIR": "/tmp/.config/matplotlib",
            "PYTHONUNBUFFERED": "1",
        }

    def command(
        self,
        argv: Sequence[str],
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        apply_limits: bool = True,
    ) -> Launch:
        """The full host command for running `argv` inside this sandbox, with the descriptors
        it inherits: spawn it inside `with` (which closes this process's copies)."""
        self._check_open()
        full_env = {**self.base_env(), **self.spec.env, **(env or {})}
        limits = self.spec.limits
        if self.identity is not None:
            # RLIMIT_NPROC counts every process of a uid, and a root service's sandboxes share
            # one: the pids cgroup bounds each sandbox instead (or the limit was waived).
            limits = limits.model_copy(update={"max_processes": None})
        inner = wrap_with_rlimits(list(argv), limits) if apply_limits else list(argv)
        launch = self._isolate(inner, cwd=cwd or self.spec.workspace_mount, env=full_env)
        if limits.nice:
            launch = launch.wrap(nice_prefix(limits.nice))
        return launch.wrap(self._cgroup.wrap_prefix()) if self._cgroup else launch

    # -- running processes --------------------------------------------------------------------
    async def exec(
        self,
        argv: Sequence[str] | str,
        *,
        timeout: float | None = None,
        stdin: bytes | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        max_output_bytes: int | None = None,
    ) -> ExecResult:
        """Run to completion with captured, capped output. Never raises for the command's
        own failures: a timeout gives exit code -1, `timed_out=True` and the partial output."""
        if isinstance(argv, str):
            argv = ["/bin/sh", "-c", argv]
        limit = max_output_bytes or self.spec.limits.max_output_bytes
        timeout = timeout if timeout is not None else self.spec.limits.wall_time_s
        started = time.perf_counter()
        proc = await self.spawn(argv, cwd=cwd, env=env, stdin=stdin is not None)
        out, err = CappedBuffer(limit), CappedBuffer(limit)

        async def pump(stream: asyncio.StreamReader | None, buf: CappedBuffer) -> None:
            if stream is None:
                return
            while chunk := await stream.read(65536):
                buf.write(chunk)

        async def feed() -> None:
            if proc.stdin is None:
                return
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                proc.stdin.write(stdin or b"")
                await proc.stdin.drain()
            proc.stdin.close()

        timed_out = False
        work = asyncio.gather(pump(proc.stdout, out), pump(proc.stderr, err), feed(), proc.wait())
        try:
            await asyncio.wait_for(asyncio.shield(work), timeout)
        except TimeoutError:
            timed_out = True
            self._kill(proc)
            # Pipes may be held open by a grandchild that escaped the group (not possible in
            # bubblewrap's pid namespace, but possible for local_unsafe): don't wait forever.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(work, 2.0)
            if not work.done():
                work.cancel()
        finally:
            # Cancelled (or failed) while the command runs: it must not run on unseen.
            if proc.returncode is None and not timed_out:
                self._kill(proc)
                work.cancel()
            self._forget(proc)
        return ExecResult(
            exit_code=-1 if timed_out else (proc.returncode if proc.returncode is not None else -1),
            stdout=out.text(),
            stderr=err.text(),
            timed_out=timed_out,
            truncated=out.truncated or err.truncated,
            duration_s=time.perf_counter() - started,
        )

    async def spawn(
        self,
        argv: Sequence[str],
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        stdin: bool = False,
        stdout: int | None = asyncio.subprocess.PIPE,
        stderr: int | None = asyncio.subprocess.PIPE,
    ) -> SandboxProcess:
        """Start a long-lived process (e.g. a kernel), in a session of its own (its process group
        is the unit close() kills), off the event loop (`process.py`). It is killed when the
        sandbox closes."""
        with self.command(argv, cwd=cwd, env=env) as launch:
            proc = await SandboxProcess.start(
                launch.argv, cwd=str(self._dir), env=LAUNCH_ENV, stdin=stdin, stdout=stdout, stderr=stderr,
                pass_fds=launch.fds,
            )  # fmt: skip
        self._processes.append(proc)
        if self._closed:  # closed while a thread started it: nobody else will stop it
            self._kill(proc)
            self._forget(proc)
            raise SandboxError(f"sandbox {self.id} was closed while a process started")
        return proc

    async def spawn_pty(
        self,
        argv: Sequence[str],
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        dimensions: tuple[int, int] = (40, 200),
    ) -> TerminalProcess:
        """Start a process on a pseudo-terminal, in a session of its own (`terminal.py`).

        In a thread: the start waits until the child has exec'd, which on a busy machine is
        long enough to stall every other rollout on the event loop."""
        return await in_sandbox_thread(self._spawn_pty, list(argv), cwd, env, dimensions)

    def _spawn_pty(
        self, argv: list[str], cwd: str | None, env: Mapping[str, str] | None, dimensions: tuple[int, int]
    ) -> TerminalProcess:
        with self.command(argv, cwd=cwd, env=env) as launch:
            proc = TerminalProcess.spawn(
                launch.argv,
                cwd=str(self._dir),
                env=LAUNCH_ENV,
                dimensions=dimensions,
                echo=False,
                pass_fds=launch.fds,
            )
        self._processes.append(proc)
        if self._closed:  # closed while this thread started it: nobody else will stop it
            self._kill(proc)
            self._forget(proc)
            raise SandboxError(f"sandbox {self.id} was closed while a terminal process started")
        return proc

    def kill_process(self, proc: SandboxProcess | TerminalProcess) -> None:
        """Kill one process this sandbox started, with its whole process group."""
        self._kill(proc)
        self._forget(proc)

    @staticmethod
    def _kill(proc: SandboxProcess | TerminalProcess) -> None:
        # Only signal a group whose leader we have not reaped yet: until then its pid (and so
        # the group id) cannot have been reused by anyone else's process.
        alive = proc.isalive() if isinstance(proc, TerminalProcess) else proc.returncode is None
        if alive:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
        if isinstance(proc, TerminalProcess):
            with contextlib.suppress(Exception):
                proc.close(force=True)

    def _forget(self, proc: Any) -> None:
        with contextlib.suppress(ValueError):
            self._processes.remove(proc)

    # -- files --------------------------------------------------------------------------------
    def host_path(self, path: str | os.PathLike[str]) -> Path:
        """Map a path as seen inside (absolute under the mount, or relative to it) to the host,
        refusing anything that escapes the workspace (`..`, symlinks pointing out)."""
        inside = PurePosixPath(os.fspath(path))
        mount = PurePosixPath(self.spec.workspace_mount)
        if inside.is_absolute():
            try:
                inside = inside.relative_to(mount)
            except ValueError:
                raise SandboxPathError(f"{path} is outside the workspace {mount}") from None
        resolved = (self.workspace / inside).resolve()
        if resolved != self.workspace and self.workspace not in resolved.parents:
            raise SandboxPathError(f"{path} resolves outside the workspace {mount}")
        return resolved

    def write_file(self, path: str | os.PathLike[str], data: str | bytes) -> Path:
        """Upload: write a file under the workspace. Every component is opened without following
        symlinks, so a link the policy swaps in after `host_path` checked it cannot redirect the
        write (made by the host, possibly as root) outside the workspace."""
        target = self.host_path(path)
        write_no_follow(self.workspace, target.relative_to(self.workspace).parts,
                        data.encode() if isinstance(data, str) else data)  # fmt: skip
        return target

    def read_file(self, path: str | os.PathLike[str]) -> bytes:
        """Download: read a file under the workspace, never through a symlink."""
        target = self.host_path(path)
        return read_no_follow(self.workspace, target.relative_to(self.workspace).parts)

    # -- lifecycle ----------------------------------------------------------------------------
    @property
    def cgroup_path(self) -> Path | None:
        """The pids cgroup holding every process of this sandbox (None where none is used)."""
        return self._cgroup.path if self._cgroup else None

    def cgroup_members(self) -> list[int]:
        """Host pids of the processes alive in this sandbox's cgroup (empty without one)."""
        return self._cgroup.members() if self._cgroup else []

    @property
    def closed(self) -> bool:
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise SandboxError(f"sandbox {self.id} is closed")

    def _wait_for_exits(self) -> None:
        """Backend-specific: wait until the processes just killed are gone, so that the cgroup
        is empty when it is removed (rather than retried until it is)."""

    def _teardown_backend(self) -> None:
        """Backend-specific cleanup after processes are gone (e.g. stopping an instance)."""

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        started = time.monotonic()
        try:
            self._close_now()
        finally:
            SANDBOX_CLOSE.observe(time.monotonic() - started)

    def _close_now(self) -> None:
        for proc in list(self._processes):
            self._kill(proc)
        self._processes.clear()
        self._wait_for_exits()
        if self._cgroup:
            self._cgroup.remove()
        self._teardown_backend()
        if self._owns_workspace:
            remove_tree(self._dir)
        else:
            shutil.rmtree(self.tmp_dir, ignore_errors=True)
            with contextlib.suppress(OSError):
                (self._dir / "empty").rmdir()
            with contextlib.suppress(OSError):
                (self._dir / OWNER_FILE).unlink()
            with contextlib.suppress(OSError):
                self._dir.rmdir()

    async def aclose(self) -> None:
        """close() without blocking the event loop: the processes are killed at once, and what
        waits (a terminal's close, the cgroup's removal, the directory tree) runs in a thread.
        Then wait for its processes' exits while the loop still runs: their pipes and exit watches
        are the loop's, and must not outlive it."""
        started = [p for p in self._processes if isinstance(p, SandboxProcess)]
        for proc in list(self._processes):
            if not isinstance(proc, TerminalProcess):  # a terminal's close sleeps: in the thread
                self._kill(proc)
        await in_sandbox_thread(self.close)
        for proc in started:
            with contextlib.suppress(ProcessLookupError, TimeoutError):
                await asyncio.wait_for(proc.wait(), 10)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __del__(self) -> None:
        # Last line of defence for a forgotten close(); never raise from a finaliser.
        with contextlib.suppress(Exception):
            if not self._closed and self._processes:
                self.close()
