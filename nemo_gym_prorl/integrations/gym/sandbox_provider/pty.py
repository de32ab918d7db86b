# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Gym's interactive terminal (`SandboxPtySession`) over a process of the sandbox.

PTY mode runs the process on a pseudo-terminal from `Sandbox.spawn_pty` (`TerminalProcess`, the same
machinery as the project's `PtyShell`); pipe mode (`pty=False`) runs it with three pipes from
`Sandbox.spawn`. Either way the process joined the sandbox's namespaces like any exec.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
import signal as signals
import uuid
from collections.abc import AsyncIterator
from typing import Any, Self

from nemo_gym.sandbox.providers.base import SandboxPtyError

from nemo_gym_prorl.sandbox.base import Sandbox
from nemo_gym_prorl.sandbox.process import SandboxProcess
from nemo_gym_prorl.sandbox.terminal import TerminalProcess

_CHUNK = 65536
_EXIT_POLL_S = 0.01


class _Stream:
    """Chunks read from one fd by the event loop, `b""` once it reached end of file."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.queue: asyncio.Queue[bytes] = asyncio.Queue()
        self.eof = fd < 0
        if not self.eof:
            asyncio.get_running_loop().add_reader(fd, self._on_readable)

    def _on_readable(self) -> None:
        try:
            data = os.read(self.fd, _CHUNK)
        except BlockingIOError:
            return
        except OSError:  # EIO: the terminal's other side closed (the process exited)
            data = b""
        if not data:
            self.stop()
        self.queue.put_nowait(data)

    def stop(self) -> None:
        if not self.eof:
            self.eof = True
            asyncio.get_running_loop().remove_reader(self.fd)

    async def read(self, timeout_s: float | None) -> bytes:
        if self.eof and self.queue.empty():
            return b""
        async with asyncio.timeout(timeout_s):
            return await self.queue.get()


class _PipeStream:
    """The same reads over an asyncio pipe (pipe mode)."""

    def __init__(self, reader: asyncio.StreamReader | None) -> None:
        self.reader = reader

    def stop(self) -> None:
        """The process owns the pipe; killing it ends the stream."""

    async def read(self, timeout_s: float | None) -> bytes:
        if self.reader is None:
            return b""
        async with asyncio.timeout(timeout_s):
            return await self.reader.read(_CHUNK)


class BubblewrapPtySession:
    """One terminal (or pipe set) to a process in a bubblewrap sandbox."""

    def __init__(self, sandbox: Sandbox, argv: list[str], *, cwd: str, env: dict[str, str],
                 rows: int, cols: int, pty: bool) -> None:  # fmt: skip
        self.session_id = f"bwrap-pty-{uuid.uuid4().hex[:12]}"
        self.mode: str | None = None
        self._sandbox = sandbox
        self._argv, self._cwd, self._env = argv, cwd, env
        self._size = (rows, cols)
        self._pty = pty
        self._ptyproc: TerminalProcess | None = None
        self._proc: SandboxProcess | None = None
        self._out: _Stream | _PipeStream | None = None
        self._err: _Stream | _PipeStream | None = None
        self._closed = False

    async def start(self) -> Self:
        if self._pty:
            self._ptyproc = await self._sandbox.spawn_pty(
                self._argv, cwd=self._cwd, env=self._env, dimensions=self._size
            )
            os.set_blocking(self._ptyproc.fd, False)
            self._out, self._err = _Stream(self._ptyproc.fd), _Stream(-1)
            self.mode = "pty"
        else:
            self._proc = await self._sandbox.spawn(self._argv, cwd=self._cwd, env=self._env, stdin=True)
            self._out, self._err = _PipeStream(self._proc.stdout), _PipeStream(self._proc.stderr)
            self.mode = "pipe"
        return self

    @property
    def closed(self) -> bool:
        return self._closed

    def _require_open(self) -> None:
        if self._closed:
            raise SandboxPtyError(f"PTY session {self.session_id} is closed")

    async def read(self, *, timeout_s: float | None = None) -> bytes:
        self._require_open()
        assert self._out is not None
        return await self._out.read(timeout_s)

    async def read_stderr(self, *, timeout_s: float | None = None) -> bytes:
        self._require_open()
        assert self._err is not None
        return await self._err.read(timeout_s)

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while chunk := await self.read():
            yield chunk

    async def write(self, data: bytes) -> None:
        self._require_open()
        if self._ptyproc is not None:
            await asyncio.to_thread(self._write_all, self._ptyproc.fd, data)
        elif self._proc is not None and self._proc.stdin is not None:
            self._proc.stdin.write(data)
            await self._proc.stdin.drain()

    @staticmethod
    def _write_all(fd: int, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(fd, view) :]
            except BlockingIOError:  # the terminal's buffer is full: wait until it drains
                select.select([], [fd], [], 1.0)

    async def resize(self, rows: int, cols: int) -> None:
        self._require_open()
        if self._ptyproc is not None:
            self._ptyproc.setwinsize(rows, cols)

    async def send_signal(self, signal: str) -> None:
        self._require_open()
        number = signals.Signals[signal if signal.startswith("SIG") else f"SIG{signal}"]
        pid = self._ptyproc.pid if self._ptyproc is not None else self._proc.pid if self._proc else None
        if pid is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, number)

    def _exit_code(self) -> int | None:
        if self._ptyproc is not None:
            if self._ptyproc.isalive():
                return None
            status = self._ptyproc.exitstatus
            return status if status is not None else 128 + (self._ptyproc.signalstatus or 0)
        if self._proc is not None and self._proc.returncode is not None:
            code = self._proc.returncode
            return code if code >= 0 else 128 - code
        return None

    async def wait_exit(self, *, timeout_s: float | None = None) -> int:
        async with asyncio.timeout(timeout_s):
            if self._proc is not None:
                await self._proc.wait()
            # A terminal process reports its exit only when asked (no event to await): poll it.
            while (code := self._exit_code()) is None:  # noqa: ASYNC110
                await asyncio.sleep(_EXIT_POLL_S)
        return code

    async def run_detached(self, command: str, *, poll_interval_s: float = 15.0) -> tuple[bytes, int | None]:
        raise NotImplementedError(
            "bubblewrap PTY sessions live in the client process: there is no server to detach to; "
            "run the command attached (sandbox.pty.exec without detach) or with sandbox.exec"
        )

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for stream in (self._out, self._err):
            if stream is not None:
                stream.stop()
        process: Any = self._ptyproc or self._proc
        if process is not None:
            # A terminal's close waits for the exit status: in a thread, never on the loop.
            await asyncio.to_thread(self._sandbox.kill_process, process)
        if self._proc is not None:
            with contextlib.suppress(ProcessLookupError, TimeoutError):
                await asyncio.wait_for(self._proc.wait(), 5)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
