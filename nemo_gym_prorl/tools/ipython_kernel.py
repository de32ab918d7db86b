# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""An IPython kernel inside a sandbox, driven from outside with jupyter_client: the `ipython` tool.

Transport: `ipc` (Unix sockets). With bubblewrap's private network namespace a TCP port inside
is unreachable from the host, while a socket file in the shared workspace is reachable from both
sides. The connection file and sockets live in `<workspace>/.prorl/`, a directory that ignores
itself for git (a `.gitignore` of `*`), so they never show up in a task's diff. The kernel is
given them as paths relative to its working directory (the workspace root), which is the same
place inside every backend, including local_unsafe where the workspace is not remapped.

Interrupts: the kernel runs under bwrap (and its pid namespace), so the host cannot signal the
kernel process itself, and signalling the sandbox's process group would hit bwrap too. The
kernel's own `interrupt_request` on the control channel makes it send SIGINT to itself.

Cost: a node runs hundreds of these, each in its own sandbox, so the kernel starts lean
(`_LEAN_LAUNCHER`: no debugger, no heartbeat; one-thread numeric pools): about 27 MiB of private
memory and 8 threads for an idle kernel instead of 34 MiB and 11 (benchmarks/kernel_memory.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import queue
import secrets
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Literal, Self

from jupyter_client.asynchronous import AsyncKernelClient
from pydantic import BaseModel

from nemo_gym_prorl.sandbox.base import Sandbox
from nemo_gym_prorl.sandbox.output import CappedBuffer, strip_ansi
from nemo_gym_prorl.sandbox.process import SandboxProcess
from nemo_gym_prorl.sandbox.spec import SandboxSpec
from nemo_gym_prorl.sandbox.workspace_fs import write_no_follow
from nemo_gym_prorl.tools.start_slots import StartSlots, limit_from_env
from nemo_gym_prorl.tools.zmq_context import shared_context

PRIVATE_DIR = ".prorl"  # our files in the workspace (git-ignored by its own .gitignore)
_SOCKET_PATH_MAX = 100  # sun_path is 108 bytes; keep room for the "-N" port suffix
_CHANNEL_PORTS = {"shell_port": 1, "iopub_port": 2, "stdin_port": 3, "control_port": 4, "hb_port": 5}
_RESULT_MAX_CHARS = 20_000

# Kernels starting at once, per event loop. A start is a Python process importing IPython, a
# second or more of CPU: 256 rollouts' kernels starting together on two cores each took minutes,
# and a third of them timed out. Queued (first come, first served), each starts in seconds, and
# the queue is backpressure: neither its wait nor the start counts against a cell's timeout.
start_slots = StartSlots(limit_from_env("PRORL_KERNEL_STARTS", per_core=2))


# Run by the kernel at start-up (an IPython profile startup file). ipykernel copies what the cell's
# subprocesses write to fd 1 and 2 from a pipe, in a thread of its own; on a loaded machine that
# thread may not have read the pipe when the cell ends, and the output would land in the next
# cell. After each cell, wait (at most 1 s) until each pipe is empty and its thread is back in
# os.read, seen twice across a GIL release (a chunk just read is then written first).
_SYNC_FD_OUTPUT = """\
def _prorl_sync_fd_output(*_):
    import fcntl, linecache, struct, sys, termios, time
    def idle(fid, thread):
        if struct.unpack("i", fcntl.ioctl(fid, termios.FIONREAD, b"\\0\\0\\0\\0"))[0]:
            return False
        frame = sys._current_frames().get(thread.ident)
        return frame is None or "os.read(" in linecache.getline(frame.f_code.co_filename, frame.f_lineno)
    deadline = time.monotonic() + 1.0
    for stream in (sys.stdout, sys.stderr):
        fid, thread = getattr(stream, "_fid", None), getattr(stream, "watch_fd_thread", None)
        if fid is None or thread is None:
            continue
        seen = 0
        while seen < 2 and time.monotonic() < deadline:
            seen = seen + 1 if idle(fid, thread) else 0
            time.sleep(0.001)
get_ipython().events.register("post_run_cell", _prorl_sync_fd_output)
del _prorl_sync_fd_output
"""


# How the kernel process starts. "lean" (the default) runs `_LEAN_LAUNCHER` with the thread pools
# of `thread_pool_env`; "ipykernel" is the kernel process as it was before them (ipykernel's own
# `python -m ipykernel_launcher`, the host's thread pools), kept to measure against
# (benchmarks/kernel_memory.py). Both start through the same `sandbox.spawn`, in the same
# isolation: only the code the kernel starts with and its thread-pool sizes differ.
KernelLauncher = Literal["lean", "ipykernel"]

# `python -c` code that starts the same IPKernelApp as `ipykernel_launcher`, less what this client
# never uses and every kernel would otherwise pay for (measured by benchmarks/kernel_memory.py):
# - debugpy: ipykernel imports it, with pydevd (about 140 modules, 7 MiB of private memory per
#   kernel), whenever it is installed, to serve the Jupyter debugger protocol that no tool speaks.
#   It is refused only while the kernel starts, so ipykernel records the debugger as unavailable;
#   code in a cell may still import debugpy.
# - the heartbeat: a thread and a zmq context of its own (two more threads) answering pings that
#   nobody sends: the client watches the kernel's process instead.
# As in `ipykernel_launcher`, the working directory (the workspace) is off sys.path while
# ipykernel loads, so no file of the policy's stands in for one of its modules (IPython puts it
# back for the cells), and sys.argv[0] is that launcher's path, as cells saw it before.
_LEAN_LAUNCHER = """\
import sys
if sys.path and sys.path[0] in ("", "."):
    del sys.path[0]
class _RefuseDebugpy:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name.partition(".")[0] in ("debugpy", "_pydevd_bundle", "_pydev_bundle", "pydevd"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, _RefuseDebugpy)
import importlib.util
_launcher = importlib.util.find_spec("ipykernel_launcher")
if _launcher is not None and _launcher.origin:
    sys.argv[0] = _launcher.origin
del _launcher
from ipykernel.kernelapp import IPKernelApp
def _no_heartbeat(self):
    self.heartbeat = None
IPKernelApp.init_heartbeat = _no_heartbeat
app = IPKernelApp.instance()
app.initialize()
sys.meta_path.remove(_RefuseDebugpy)
del _RefuseDebugpy, _no_heartbeat
app.start()
"""

# Numeric libraries start a thread per host core at import (OpenBLAS under numpy: 127 more
# threads in every kernel of a 128-core node, counted by the sandbox's process limit, each with
# its buffers). A node running hundreds of rollouts has no spare cores for them: one thread each,
# or the sandbox's CPU quota rounded up. The sandbox's own `env` (SandboxSpec.env) wins.
THREAD_POOL_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def thread_pool_env(spec: SandboxSpec) -> dict[str, str]:
    """The thread-pool sizes a kernel in a sandbox of `spec` starts with (`THREAD_POOL_VARIABLES`)."""
    cpus = spec.limits.cpus
    threads = str(max(1, math.ceil(cpus)) if cpus is not None else 1)
    return {name: threads for name in THREAD_POOL_VARIABLES if name not in spec.env}


class KernelError(RuntimeError):
    """The kernel could not be started or used (closed, failed start-up)."""


class KernelBusyError(KernelError):
    """A second execution was requested while one is still running on the same kernel."""


class ExecutionError(BaseModel):
    ename: str
    evalue: str
    traceback: str  # ANSI-stripped, one string


class ExecutionResult(BaseModel):
    stdout: str = ""
    stderr: str = ""
    result: str | None = None  # text/plain of the cell's value (`Out[n]`)
    error: ExecutionError | None = None
    images: list[str] = []  # base64-encoded PNGs (display_data / execute_result)
    execution_count: int | None = None
    timed_out: bool = False
    restarted: bool = False  # the kernel was replaced: variables and imports are gone
    truncated: bool = False
    hint: str | None = None
    duration_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error is None and not self.timed_out


def private_dir(sandbox: Sandbox) -> Path:
    """`<workspace>/.prorl` on the host, created with a `.gitignore` that ignores everything."""
    write_private(sandbox, ".gitignore", b"*\n")
    return sandbox.workspace / PRIVATE_DIR


def write_private(sandbox: Sandbox, relative: str, data: bytes) -> None:
    """Write `<workspace>/.prorl/<relative>` as the sandbox's user would own it, never through a
    symlink the policy planted (the host writes as the service's user, possibly root)."""
    write_no_follow(sandbox.workspace, [PRIVATE_DIR, *relative.split("/")], data)


class _Collector:
    """Accumulates one execution's IOPub messages into an `ExecutionResult`."""

    def __init__(self, max_output_bytes: int) -> None:
        self.stdout = CappedBuffer(max_output_bytes)
        self.stderr = CappedBuffer(max_output_bytes)
        self.result: str | None = None
        self.error: ExecutionError | None = None
        self.images: list[str] = []
        self.execution_count: int | None = None
        self.idle = False

    def add(self, msg: dict[str, Any]) -> None:
        kind, content = msg["msg_type"], msg["content"]
        if kind == "stream":
            target = self.stderr if content.get("name") == "stderr" else self.stdout
            target.write(content.get("text", "").encode())
        elif kind in ("execute_result", "display_data"):
            data = content.get("data", {})
            if "image/png" in data:
                self.images.append("".join(str(data["image/png"]).split()))
            elif kind == "execute_result":
                self.result = _cap(str(data.get("text/plain", "")))
            elif "text/plain" in data:  # display(obj) of something without an image
                self.stdout.write((str(data["text/plain"]) + "\n").encode())
            if kind == "execute_result":
                self.execution_count = content.get("execution_count")
        elif kind == "error":
            self.error = ExecutionError(
                ename=content.get("ename", ""),
                evalue=content.get("evalue", ""),
                traceback=strip_ansi("\n".join(content.get("traceback", []))),
            )
        elif kind == "clear_output":  # progress bars redraw by clearing: keep the last frame
            self.stdout = CappedBuffer(self.stdout.limit)
            self.stderr = CappedBuffer(self.stderr.limit)
        elif kind == "execute_input":
            self.execution_count = content.get("execution_count")
        elif kind == "status" and content.get("execution_state") == "idle":
            self.idle = True

    def build(self, started: float, **extra: Any) -> ExecutionResult:
        return ExecutionResult(
            stdout=strip_ansi(self.stdout.text()),
            stderr=strip_ansi(self.stderr.text()),
            result=self.result,
            error=self.error,
            images=self.images,
            execution_count=self.execution_count,
            truncated=self.stdout.truncated or self.stderr.truncated,
            duration_s=time.monotonic() - started,
            **extra,
        )


async def _cancel(task: asyncio.Future[Any]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task


def _cap(text: str) -> str:
    if len(text) <= _RESULT_MAX_CHARS:
        return text
    half = _RESULT_MAX_CHARS // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters truncated ...]\n{text[-half:]}"


class IPythonKernel:
    """One IPython kernel in `sandbox`; `execute()` runs code in it, one cell at a time.

    `execute()` never raises for what the code does (exceptions, timeouts, killing the kernel):
    that comes back in the `ExecutionResult`. It raises `KernelBusyError` for a concurrent
    call and `KernelError` when the kernel is closed or cannot start.
    """

    def __init__(
        self,
        sandbox: Sandbox,
        *,
        timeout: float = 120.0,
        max_output_bytes: int | None = None,
        start_timeout: float = 60.0,
        interrupt_grace_s: float = 3.0,
        python: str = "python",
        launcher: KernelLauncher = "lean",
    ) -> None:
        self.sandbox = sandbox
        self.default_timeout = timeout
        self.max_output_bytes = max_output_bytes or sandbox.spec.limits.max_output_bytes
        self.start_timeout = start_timeout
        self.interrupt_grace_s = interrupt_grace_s
        self.python = python
        self.launcher = launcher
        self._proc: SandboxProcess | None = None
        self._exited: asyncio.Task[int] | None = None
        self._client: AsyncKernelClient | None = None
        self._files: list[Path] = []
        self._stderr = CappedBuffer(16 * 1024)  # the kernel process's own stderr, for diagnostics
        self._stderr_task: asyncio.Task[None] | None = None
        self._busy = False
        self._closed = False
        self._restarts = 0
        self._ever_started = False

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.returncode is None

    @property
    def restarts(self) -> int:
        return self._restarts

    # -- lifecycle ------------------------------------------------------------------------------
    async def start(self) -> None:
        """Start the kernel and wait until it answers (idempotent)."""
        if self._closed:
            raise KernelError("the kernel is closed")
        if self.alive and self._client is not None:
            return
        await self._launch()

    async def _launch(self) -> None:
        async with start_slots():
            await self._launch_now()

    async def _launch_now(self) -> None:
        await self._shutdown_process()
        base = private_dir(self.sandbox)
        name = f"kernel-{secrets.token_hex(4)}"
        host_ip = base / name
        if len(str(host_ip)) > _SOCKET_PATH_MAX:
            raise KernelError(
                f"workspace path too long for Unix sockets ({len(str(host_ip))} > {_SOCKET_PATH_MAX} "
                f"characters): {host_ip}; use a shorter workspace or PRORL_SANDBOX_ROOT"
            )
        key = secrets.token_hex(32)
        info: dict[str, Any] = {
            "transport": "ipc",
            "ip": f"{PRIVATE_DIR}/{name}",  # relative to the kernel's cwd: the workspace root
            "key": key,
            "signature_scheme": "hmac-sha256",
            "kernel_name": "python3",
            **_CHANNEL_PORTS,
        }
        conn_file = base / f"{name}.json"
        write_private(self.sandbox, conn_file.name, json.dumps(info).encode())
        self._files = [conn_file, *(Path(f"{host_ip}-{port}") for port in _CHANNEL_PORTS.values())]
        write_private(self.sandbox, "ipython/profile_default/startup/00-prorl-sync-fd-output.py",
                      _SYNC_FD_OUTPUT.encode())  # fmt: skip

        self._stderr = CappedBuffer(16 * 1024)
        env = {
            # IPython's profile and matplotlib's cache default to $HOME, which is the workspace.
            "IPYTHONDIR": f"{PRIVATE_DIR}/ipython",
            "MPLCONFIGDIR": f"{PRIVATE_DIR}/matplotlib",
            "JUPYTER_PLATFORM_DIRS": "1",
        }
        if self.launcher == "lean":
            start = [self.python, "-c", _LEAN_LAUNCHER]
            env.update(thread_pool_env(self.sandbox.spec))
        else:
            start = [self.python, "-m", "ipykernel_launcher"]
        self._proc = await self.sandbox.spawn(
            [
                *start,
                "-f", f"{PRIVATE_DIR}/{conn_file.name}",
                "--HistoryManager.enabled=False",  # no sqlite history file
            ],
            env=env,
            stdout=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        self._exited = asyncio.ensure_future(self._proc.wait())
        self._stderr_task = asyncio.ensure_future(self._drain_stderr(self._proc))

        # The process's one zmq context: a context per client would be two threads and a dozen
        # file descriptors per kernel (and a blocking context teardown at every close).
        client = AsyncKernelClient(context=shared_context())
        client.load_connection_info({**info, "ip": str(host_ip), "key": key.encode()})
        # No heartbeat channel: we own the process and watch it directly, which is both more
        # reliable than heartbeats and free. No stdin channel: cells run with allow_stdin=False
        # (input() raises at once), so it would only hold two descriptors per kernel.
        client.start_channels(hb=False, stdin=False)
        self._client = client
        try:
            await self._wait_ready(client, client.get_shell_msg)
            # Answered on the shell channel is not yet ready: a cell's output comes on IOPub, whose
            # subscription may still be joining (a message published before it is lost, and the
            # cell would wait out its timeout). Ready when IOPub carries our requests' status too.
            await self._wait_ready(client, client.get_iopub_msg)
        except BaseException:
            await self._shutdown_process()
            raise
        # The kernel_info traffic of the start-up is not part of any cell.
        await self._drain(client)
        self._ever_started = True

    async def _wait_ready(
        self, client: AsyncKernelClient, receive: Callable[[], Awaitable[dict[str, Any]]]
    ) -> None:
        """Ask for kernel_info until `receive` (a channel's next message) brings a message about
        one of the requests. A request sent before the kernel bound its sockets is queued by zmq,
        but asking again every half second costs nothing."""
        assert self._exited is not None
        deadline = time.monotonic() + self.start_timeout
        asked: set[str] = set()  # an answer to any of our requests will do
        while (remaining := deadline - time.monotonic()) > 0:
            asked.add(client.kernel_info())
            wait_until = time.monotonic() + min(0.5, remaining)
            while (left := wait_until - time.monotonic()) > 0:
                getter = asyncio.ensure_future(receive())
                done, _ = await asyncio.wait(
                    {getter, self._exited}, timeout=left, return_when=asyncio.FIRST_COMPLETED
                )
                if getter not in done:
                    await _cancel(getter)
                    if self._exited.done():
                        raise KernelError(
                            f"the IPython kernel exited during start-up (status {self._exited.result()}): "
                            f"{self._stderr.text()[-2000:]}"
                        )
                    continue
                if getter.result().get("parent_header", {}).get("msg_id") in asked:
                    return
        raise KernelError(
            f"the IPython kernel did not answer within {self.start_timeout:g}s: {self._stderr.text()[-2000:]}"
        )

    async def _drain_stderr(self, proc: SandboxProcess) -> None:
        if proc.stderr is None:
            return
        with contextlib.suppress(Exception):
            while chunk := await proc.stderr.read(65536):
                self._stderr.write(chunk)

    @staticmethod
    async def _drain(client: AsyncKernelClient) -> None:
        for get in (client.get_iopub_msg, client.get_shell_msg):
            with contextlib.suppress(queue.Empty):
                while True:
                    await get(timeout=0)

    async def _shutdown_process(self) -> None:
        if self._client is not None:
            with contextlib.suppress(Exception):
                self._client.stop_channels()
            self._client = None
        if self._proc is not None:
            self.sandbox.kill_process(self._proc)  # the kernel's whole process group
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._proc.wait(), 5.0)
            self._proc = None
        for task in (self._stderr_task, self._exited):
            if task is not None and not task.done():
                task.cancel()
        self._stderr_task = self._exited = None
        for path in self._files:
            with contextlib.suppress(OSError):
                path.unlink()
        self._files = []

    async def close(self) -> None:
        """Stop the kernel and remove its files. Idempotent."""
        if self._closed:
            return
        self._closed = True
        await self._shutdown_process()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- executing -------------------------------------------------------------------------------
    async def execute(self, code: str, *, timeout: float | None = None) -> ExecutionResult:
        """Run `code` as one cell. On timeout the kernel is interrupted (state kept); if it does
        not respond, or if it dies, it is restarted and the result says so."""
        if self._closed:
            raise KernelError("the kernel is closed")
        if self._busy:
            raise KernelBusyError(
                "code is already running on this kernel; wait for it to finish (one cell at a time)"
            )
        self._busy = True
        try:
            return await self._execute(code, self.default_timeout if timeout is None else timeout)
        except asyncio.CancelledError:
            # The caller gave up on this cell; the kernel must not go on running it.
            if self._client is not None and self.alive:
                self._client.control_channel.send(self._client.session.msg("interrupt_request", {}))
            raise
        finally:
            self._busy = False

    async def _execute(self, code: str, timeout: float) -> ExecutionResult:
        notes: list[str] = []
        restarted = False
        if self._client is None or not self.alive:
            if self._ever_started:
                notes.append(self._death_note("The kernel had died"))
                restarted = True
                self._restarts += 1
            await self._launch()  # bounded by start_timeout once its turn to start came
        started = time.monotonic()
        client = self._client
        assert client is not None and self._exited is not None

        msg_id = client.execute(code, store_history=True, allow_stdin=False, stop_on_error=False)
        collector = _Collector(self.max_output_bytes)
        outcome = await self._collect(client, msg_id, collector, started + timeout)
        if outcome == "done":
            await self._read_reply(client, msg_id, collector)
            return collector.build(started, restarted=restarted, hint=" ".join(notes) or None)
        if outcome == "died":
            notes.append(self._death_note("The kernel died while running this code"))
            await self._restart()
            return collector.build(started, restarted=True, hint=" ".join(notes))

        # Timed out: interrupt and give the kernel a moment to unwind to idle.
        notes.append(f"Execution timed out after {timeout:g}s.")
        client.control_channel.send(client.session.msg("interrupt_request", {}))
        outcome = await self._collect(client, msg_id, collector, time.monotonic() + self.interrupt_grace_s)
        if outcome == "done":
            await self._read_reply(client, msg_id, collector)
            notes.append("It was interrupted (KeyboardInterrupt); the kernel's variables are kept.")
            return collector.build(started, timed_out=True, restarted=restarted, hint=" ".join(notes))
        notes.append(
            "The kernel did not respond to the interrupt, so it was restarted: "
            "all variables and imports are gone."
        )
        await self._restart()
        return collector.build(started, timed_out=True, restarted=True, hint=" ".join(notes))

    async def _collect(
        self, client: AsyncKernelClient, msg_id: str, collector: _Collector, deadline: float
    ) -> str:
        """Feed IOPub messages of `msg_id` to `collector` until idle ("done"), kernel exit
        ("died") or `deadline` ("timeout")."""
        assert self._exited is not None
        while not collector.idle:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return "timeout"
            if self._exited.done():
                return "died"
            getter = asyncio.ensure_future(client.get_iopub_msg())
            done, _ = await asyncio.wait(
                {getter, self._exited}, timeout=remaining, return_when=asyncio.FIRST_COMPLETED
            )
            if getter not in done:
                await _cancel(getter)
                continue
            msg = getter.result()
            if msg.get("parent_header", {}).get("msg_id") == msg_id:
                collector.add(msg)  # anything else is a leftover of an earlier, abandoned cell
        return "done"

    async def _read_reply(self, client: AsyncKernelClient, msg_id: str, collector: _Collector) -> None:
        """Consume the shell reply (it carries the execution count), skipping stale replies."""
        deadline = time.monotonic() + 5.0
        while (remaining := deadline - time.monotonic()) > 0:
            try:
                reply = await client.get_shell_msg(timeout=remaining)
            except queue.Empty:
                return
            if reply.get("parent_header", {}).get("msg_id") == msg_id:
                count = reply["content"].get("execution_count")
                if count is not None:
                    collector.execution_count = count
                return

    async def _restart(self) -> None:
        self._restarts += 1
        await self._launch()

    def _death_note(self, what: str) -> str:
        code = self._proc.returncode if self._proc is not None else None
        status = f" (exit status {code})" if code is not None else ""
        return (
            f"{what}{status}; it was restarted: all variables and imports are gone, "
            "so re-run any set-up code you need."
        )
