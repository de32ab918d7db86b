# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The harness's own process: one per harness rollout, holding no key but its rollout's.

    async with harness_process(harness, request, confine=True) as process:
        await process.wait(timeout_s)          # TimeoutError: still running
    run = process.result()                     # its HarnessRun (None: it was killed)

The service starts `python -m nemo_gym_prorl.agent.harness.child` in a new process group, with
an environment of its own making (PATH; HOME and TMPDIR in a private temporary directory; the
harness's own settings, `harness.environment(home)`; nothing of the service's), and writes on its
standard input all it gets: the harness (its class and options, rebuilt there), the task
statement, the model's name, the call budget, its door's base URL and token, and the URL its
commands go to (`RemoteCommands`). It answers its `HarnessRun` as JSON on standard output; what
the harness prints goes to standard error. The process is killed with its whole group when the
block ends, whether it has ended or not, and reaped.

Confinement, where bubblewrap works (`bubblewrap_works`), is the sandboxes' kind: a fresh root
holding read-only the system directories (host secrets hidden as in sandboxes), the interpreter
and its venv, this package, and the files the harness names (`harness.files`); the private home
read-write; a fresh /tmp, /dev and /proc (its own PID namespace: no other process is visible),
never root (the sandboxes' user under a root service), no capability, the syscall filter, and
the process dies with the service (`sandbox.launch`, as every sandbox starts). The service's
home, PRORL_HOME (the SWE cache and its gold patches), the sandboxes and every other rollout are
not there. Its network namespace has loopback alone: the recording endpoint's Unix socket is
bound in (`door_relay`), so it reaches its door and nothing else of the host (not the model
server, not the service). Without bubblewrap it runs unconfined with the same environment: it
holds no token but its own, but it can read whatever the service's user can.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import glob
import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from pydantic import BaseModel, ValidationError

import nemo_gym_prorl
from nemo_gym_prorl.agent.harness.base import Harness, HarnessRun
from nemo_gym_prorl.agent.harness.child import CONFINED_VARIABLE
from nemo_gym_prorl.agent.harness.door_relay import SOCKET_INSIDE, SOCKET_VARIABLE
from nemo_gym_prorl.sandbox.base import LAUNCH_ENV, default_sandbox_root, project_runtime_binds
from nemo_gym_prorl.sandbox.bubblewrap import SECRET_DIRS, SECRET_FILES, SYSTEM_DIRS, THIRD_PARTY_GLOBS
from nemo_gym_prorl.sandbox.identity import SandboxIdentityError, sandbox_identity
from nemo_gym_prorl.sandbox.launch import (
    Launch,
    bwrap_launch,
    find_bwrap,
    namespace_options,
    with_parent_dirs,
)
from nemo_gym_prorl.sandbox.runtime import prorl_home
from nemo_gym_prorl.sandbox.seccomp import FORK_SERVER_ALLOWS

PACKAGE_DIR = Path(nemo_gym_prorl.__file__).resolve().parent
CHILD = "nemo_gym_prorl.agent.harness.child"  # the harness's process runs this module
ZYGOTE = "nemo_gym_prorl.agent.harness.zygote"  # a harness's fork server runs this one
STDERR_TAIL = 4000  # characters of a failed process's standard error kept in the error


class HarnessProcessError(RuntimeError):
    """The harness's process failed (its own defect, or it was killed from outside)."""


def default_max_processes() -> int:
    """Harness processes at once, by default: eight per CPU, at least 16. A harness mostly waits
    for the model and its commands, and the backend batches the calls of every rollout in flight
    (with two per CPU, 4 rollouts on 2 cores left vLLM decoding 2-4 sequences where it decodes
    16 for about the same step time); a rollout's process is a fork of the warm server, sharing
    its imports' memory."""
    return max(16, 8 * (os.process_cpu_count() or 1))


@functools.cache
def bubblewrap_works() -> bool:
    """Whether bubblewrap is installed and may make namespaces here (once per process)."""
    bwrap = find_bwrap()
    if bwrap is None:
        return False
    try:
        identity = sandbox_identity()
    except SandboxIdentityError:
        return False
    options = [*namespace_options(identity, network=False), "--die-with-parent"]
    fs_args = ["--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev"]
    with bwrap_launch(
        bwrap, ["true"], options=options, fs_args=fs_args, env={}, cwd="/", identity=identity
    ) as probe:
        try:
            done = subprocess.run(
                probe.argv, capture_output=True, timeout=30, pass_fds=probe.fds, env=LAUNCH_ENV
            )
        except (OSError, subprocess.TimeoutExpired):
            return False
    return done.returncode == 0


# -- the harness, by name ------------------------------------------------------------------------


def _qualified(obj: type) -> str:
    return f"{obj.__module__}:{obj.__qualname__}"


def harness_spec(harness: Harness) -> dict[str, Any]:
    """How the harness's process rebuilds it (`child.build_harness`): its class and its
    options, by name."""
    spec: dict[str, Any] = {"class": _qualified(type(harness))}
    options = getattr(harness, "options", None)
    if isinstance(options, BaseModel):
        spec["options_class"] = _qualified(type(options))
        spec["options"] = options.model_dump(mode="json")
    return spec


def _import_roots(harness: Harness) -> list[Path]:
    """The `sys.path` entries the harness's modules come from, where the interpreter alone does
    not find them (a harness of one's own, or of the tests)."""
    covered = [Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve(), PACKAGE_DIR]
    roots: list[Path] = []
    classes = [type(harness), type(getattr(harness, "options", None))]
    for name in {c.__module__ for c in classes if c is not type(None)}:
        file = getattr(sys.modules.get(name), "__file__", None)
        if name == "__main__" or file is None:
            raise HarnessProcessError(f"the harness's module {name!r} cannot be imported by name")
        path = Path(file).resolve()
        root = path.parents[name.count(".") + (path.name == "__init__.py")]
        if not any(path.is_relative_to(c) for c in covered) and root not in roots:
            roots.append(root)
    return roots


# -- the service's side --------------------------------------------------------------------------


def _environment(harness: Harness, home: Path, roots: list[Path]) -> dict[str, str]:
    env = {
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), "/usr/local/bin", "/usr/bin", "/bin"]),
        "HOME": str(home),
        "TMPDIR": str(home / "tmp"),
        "LANG": "C.UTF-8",
        "PYTHONSAFEPATH": "1",  # not its working directory on sys.path
    }
    if roots:
        env["PYTHONPATH"] = os.pathsep.join(map(str, roots))
    settings = getattr(harness, "environment", None)
    if settings is not None:
        env.update(settings(home))
    return env


def _filesystem(home: Path, readable: list[Path], door_socket: Path) -> list[str]:
    """bubblewrap's filesystem around the harness's command (see the module's docstring)."""
    args = ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    for name in SYSTEM_DIRS:
        host = Path("/") / name
        if host.is_symlink():  # merged-/usr layouts: /bin -> usr/bin
            args += ["--symlink", os.readlink(host), f"/{name}"]
        elif host.is_dir():
            args += ["--ro-bind", str(host), f"/{name}"]
    for secret in SECRET_FILES:
        if os.path.lexists(secret):
            args += ["--ro-bind", "/dev/null", secret]
    for hidden in [*SECRET_DIRS, *(d for pattern in THIRD_PARTY_GLOBS for d in sorted(glob.glob(pattern)))]:
        if os.path.isdir(hidden) and not os.path.islink(hidden):
            args += ["--tmpfs", hidden]
    # The interpreter and its venv (at their real paths and the ones they were reached by), then
    # this package, the harness's modules and files: after the hidden directories, which hide
    # the host's site-packages, not an interpreter that lives there.
    binds = [(str(source), target) for source, target in project_runtime_binds()]
    binds += [(str(path), str(path)) for path in readable]
    for source, target in binds:
        args += ["--ro-bind", source, target]
    args += ["--bind", str(home), str(home), "--bind", str(door_socket), SOCKET_INSIDE]
    # What must stay unseen even where a bound directory holds it.
    shown = [Path(target) for _, target in binds]
    for secret in (prorl_home(), Path.home(), default_sandbox_root()):
        secret = secret.resolve()
        if secret.is_dir() and any(secret != s and secret.is_relative_to(s) for s in shown):
            args += ["--tmpfs", str(secret)]
    return with_parent_dirs(args)


@dataclass
class HarnessPlan:
    """How to start a harness's process: its command (with the descriptors it inherits), the
    environment it starts with, and its private home."""

    launch: Launch
    env: dict[str, str]
    home: Path


class HarnessProcess:
    """A started harness process: its request written, its answer read as it comes."""

    def __init__(self, proc: asyncio.subprocess.Process, stderr: BinaryIO, request: bytes) -> None:
        self.proc = proc
        self.pid = proc.pid  # its process group's id too
        self.killed = False
        self.stderr_tail = ""  # the end of what it wrote on standard error, once it has ended
        self._stderr = stderr
        self._io = asyncio.ensure_future(proc.communicate(request))

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode

    async def wait(self, timeout_s: float | None) -> None:
        """Until it has ended (`TimeoutError` after `timeout_s`; it goes on running)."""
        await asyncio.wait_for(asyncio.shield(self._io), timeout_s)

    async def kill(self) -> None:
        """Kill its whole group (the process, whatever it started) and reap it."""
        if self.proc.returncode is None:
            self.killed = True
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)
        try:
            # Its output pipe may be held by a process that left the group (only without
            # bubblewrap, whose PID namespace dies with it): do not wait on that.
            await asyncio.wait_for(asyncio.shield(self._io), 5.0)
        except TimeoutError:
            self._io.cancel()
            await self.proc.wait()
        finally:
            self._stderr.seek(0, os.SEEK_END)
            self._stderr.seek(max(0, self._stderr.tell() - STDERR_TAIL))
            self.stderr_tail = self._stderr.read().decode(errors="replace")

    def result(self) -> HarnessRun | None:
        """Its `HarnessRun`, once it has been reaped (None: it was killed before it answered)."""
        stdout = self._io.result()[0] if self._io.done() and not self._io.cancelled() else b""
        if self.proc.returncode == 0:
            try:
                return HarnessRun.model_validate_json(stdout)
            except ValidationError as exc:
                raise HarnessProcessError(f"the harness process answered no run: {exc}") from None
        if self.killed:
            return None
        raise HarnessProcessError(
            f"the harness process failed (exit {self.proc.returncode}):\n{self.stderr_tail}"
        )


def harness_plan(
    harness: Harness, work: Path, *, confine: bool, door_socket: Path | None = None, module: str = CHILD
) -> HarnessPlan:
    """The command (`python -m <module>`), its environment and the private home of a harness's
    process in `work`. Confined, it runs as the sandboxes' user, in a network namespace of its
    own whose only way out is the endpoint's `door_socket`, under the syscall filter
    (`forking`: the fork server's, which its children complete themselves)."""
    roots = _import_roots(harness)
    home = work.resolve() / "home"
    (home / "tmp").mkdir(parents=True)
    env = _environment(harness, home, roots)
    argv = [sys.executable, "-m", module]
    if not confine:
        return HarnessPlan(Launch(argv), env, home)
    if door_socket is None:
        raise HarnessProcessError("a confined harness process needs the endpoint's door socket")
    identity = sandbox_identity()
    if identity is not None:  # a root service: the home is the sandboxes' user's
        for path in (home, home / "tmp"):
            identity.chown(path)
    readable = [PACKAGE_DIR, *roots, *(Path(f).resolve() for f in getattr(harness, "files", ()))]
    bwrap = find_bwrap()
    assert bwrap is not None
    options = [*namespace_options(identity, network=False), "--die-with-parent"]
    env[SOCKET_VARIABLE] = SOCKET_INSIDE
    env[CONFINED_VARIABLE] = "1"
    launch = bwrap_launch(
        bwrap, argv, options=options, fs_args=_filesystem(home, readable, door_socket), env=env,
        cwd=str(home), identity=identity,
        seccomp_allows=FORK_SERVER_ALLOWS if module == ZYGOTE else frozenset(),
    )  # fmt: skip
    return HarnessPlan(launch, dict(LAUNCH_ENV), home)


@contextlib.asynccontextmanager
async def harness_process(
    harness: Harness, request: dict[str, Any], *, confine: bool, door_socket: Path | None = None
) -> AsyncIterator[HarnessProcess]:
    """The harness's process, running for the block (`request`: its `task` and `commands`);
    killed with its group, and reaped, when the block ends."""
    payload = json.dumps({"harness": harness_spec(harness), **request}).encode()
    with tempfile.TemporaryDirectory(prefix="prorl-harness-", ignore_cleanup_errors=True) as work:
        plan = harness_plan(harness, Path(work), confine=confine, door_socket=door_socket)
        with tempfile.TemporaryFile(dir=work) as stderr, plan.launch:
            proc = await asyncio.create_subprocess_exec(
                *plan.launch.argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=stderr,
                cwd=plan.home,
                env=plan.env,
                start_new_session=True,  # its own process group: the unit killed
                pass_fds=plan.launch.fds,
            )
            process = HarnessProcess(proc, stderr, payload)
            try:
                yield process
            finally:
                await process.kill()
