# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""A sandbox's child process, started off the event loop, with asyncio's streams.

`asyncio.create_subprocess_exec` starts the child on the event loop's thread, which waits there
until the child has exec'd: on a busy machine that is long enough to stall every rollout the
loop drives (an IPython kernel's start was a seventh of the loop's time with 256 kernels). Here
`subprocess.Popen` runs in the sandbox pool, and only the cheap part comes back to the loop:
the pipes become asyncio streams, and the exit is watched through a pidfd (a poll where the
kernel has none).

The object answers what callers ask of asyncio's `Process`: `pid`, `returncode`, `stdin`
(a `StreamWriter`), `stdout`/`stderr` (`StreamReader`s), `wait()`, `kill()`. Its exit status is
collected by its own `Popen`, never by a bare `waitpid` that could race it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
from collections.abc import Mapping, Sequence
from typing import IO

from nemo_gym_prorl.sandbox.threads import in_sandbox_thread

_EXIT_POLL_S = 0.05  # where pidfd_open is missing (Linux < 5.3)


class _StdinProtocol(asyncio.streams.FlowControlMixin):
    """Flow control for the child's stdin, and the close waiter `StreamWriter.wait_closed` wants."""

    def __init__(self) -> None:
        super().__init__()
        self._closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        if not self._closed.done():
            self._closed.set_result(None)  # a broken pipe is the writer's to see, on drain

    def _get_close_waiter(self, stream: asyncio.StreamWriter) -> asyncio.Future[None]:
        return self._closed


class SandboxProcess:
    def __init__(self, popen: subprocess.Popen[bytes], pidfd: int | None) -> None:
        self._popen = popen
        self.pid = popen.pid
        self.stdin: asyncio.StreamWriter | None = None
        self.stdout: asyncio.StreamReader | None = None
        self.stderr: asyncio.StreamReader | None = None
        self._exited: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._pidfd = pidfd
        self._poller: asyncio.Task[None] | None = None

    @classmethod
    async def start(
        cls,
        argv: Sequence[str],
        *,
        cwd: str,
        env: Mapping[str, str],
        stdin: bool,
        stdout: int | None,
        stderr: int | None,
        pass_fds: Sequence[int] = (),
    ) -> SandboxProcess:
        """Start `argv` in a session of its own (its process group is the unit a kill takes)."""
        popen, pidfd = await in_sandbox_thread(
            _popen, list(argv), cwd, dict(env), stdin, stdout, stderr, tuple(pass_fds)
        )
        proc = cls(popen, pidfd)
        try:
            await proc._connect()
        except BaseException:
            proc.kill()
            proc._close_pipes()
            if proc._pidfd is not None:  # not watched yet: nobody else closes it
                os.close(proc._pidfd)
                proc._pidfd = None
            raise
        proc._watch_exit()
        return proc

    async def _connect(self) -> None:
        loop = asyncio.get_running_loop()
        if self._popen.stdin is not None:
            stdin = _owned_by(loop, self._popen.stdin, "wb")
            transport, protocol = await loop.connect_write_pipe(_StdinProtocol, stdin)
            self.stdin = asyncio.StreamWriter(transport, protocol, None, loop)
        for name in ("stdout", "stderr"):
            pipe: IO[bytes] | None = getattr(self._popen, name)
            if pipe is not None:
                reader = asyncio.StreamReader(loop=loop)
                await loop.connect_read_pipe(
                    lambda r=reader: asyncio.StreamReaderProtocol(r), _owned_by(loop, pipe, "rb")
                )
                setattr(self, name, reader)

    def _watch_exit(self) -> None:
        loop = asyncio.get_running_loop()
        if self._pidfd is not None:
            loop.add_reader(self._pidfd, self._on_exit)
        else:
            self._poller = loop.create_task(self._poll_exit())

    def _on_exit(self) -> None:
        code = self._popen.poll()  # the pidfd is readable once the child has exited: this reaps it
        if code is None:
            return
        if self._pidfd is not None:
            asyncio.get_running_loop().remove_reader(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = None
        if not self._exited.done():
            self._exited.set_result(code)

    async def _poll_exit(self) -> None:
        # Nothing to await without a pidfd; a thread blocked in wait() per live process would fill
        # the sandbox pool with kernels that live as long as their rollouts.
        while self._popen.poll() is None:  # noqa: ASYNC110
            await asyncio.sleep(_EXIT_POLL_S)
        self._on_exit()

    @property
    def returncode(self) -> int | None:
        return self._popen.returncode

    async def wait(self) -> int:
        return await asyncio.shield(self._exited)

    def kill(self) -> None:
        if self._popen.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self._popen.kill()

    def _close_pipes(self) -> None:
        for pipe in (self._popen.stdin, self._popen.stdout, self._popen.stderr):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()

    def __repr__(self) -> str:
        return f"<SandboxProcess {self.pid} returncode={self.returncode}>"


def _owned_by(loop: asyncio.AbstractEventLoop, pipe: IO[bytes], mode: str) -> IO[bytes]:
    """`pipe` as `loop`'s pipe transport may own it: closed exactly once, by the transport.

    asyncio's transport closes the file object it is given. uvloop's (the loop uvicorn picks, so
    the one a NeMo Gym server runs on) closes the descriptor in libuv and then the file object as
    well: a second close of the number, which a sandbox thread may have reused in between; its
    new terminal or pipe then vanished under it (EBADF, EIO). uvloop gets a duplicate in a file
    object that never closes it, and the original is closed here, once."""
    if not type(loop).__module__.startswith("uvloop"):
        return pipe
    view = open(os.dup(pipe.fileno()), mode, buffering=0, closefd=False)  # noqa: SIM115
    pipe.close()
    return view


def _popen(
    argv: list[str],
    cwd: str,
    env: dict[str, str],
    stdin: bool,
    stdout: int | None,
    stderr: int | None,
    pass_fds: tuple[int, ...],
) -> tuple[subprocess.Popen[bytes], int | None]:
    popen: subprocess.Popen[bytes] = subprocess.Popen(
        argv,
        stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
        stdout=stdout,
        stderr=stderr,
        start_new_session=True,
        cwd=cwd,
        env=env,
        pass_fds=pass_fds,
    )
    try:
        pidfd: int | None = os.pidfd_open(popen.pid)  # before anyone reaps it: still ours
    except (AttributeError, OSError):
        pidfd = None
    return popen, pidfd
