# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The service's side of a harness's fork server (`zygote`): one warm process per harness, a
forked child per rollout.

    server = await ForkServer(harness, confine=True).start()   # imports the harness once
    async with server.process(request) as process:             # a fork: starts at once
        await process.wait(timeout_s)                          # TimeoutError: still running
    run = process.result()                                     # its HarnessRun (None: killed)
    await server.aclose()                                      # every child killed, reaped

A rollout's child holds what a process of its own would (`process.harness_process`: the same
environment of its own making and the same confinement, made once for the server), with the
difference that its imports are done: mini-swe-agent's litellm costs ~5 s of CPU per process,
a fork of the warm server a few milliseconds. Why it is still one rollout per process: its
door token (in a file of its home the child reads and removes; the server never holds one, so no
fork inherits another rollout's), its home and its process group are its own, and it ends (or
is killed) with its rollout.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import shutil
import signal
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from nemo_gym_prorl.agent.harness.base import Harness, HarnessRun
from nemo_gym_prorl.agent.harness.process import (
    STDERR_TAIL,
    ZYGOTE,
    HarnessProcessError,
    harness_plan,
    harness_spec,
)
from nemo_gym_prorl.sandbox.identity import sandbox_identity

READY_TIMEOUT_S = 300.0  # the harness's imports, on a loaded machine


class ForkedRun:
    """One rollout's child of the fork server (the interface of `process.HarnessProcess`)."""

    def __init__(self, server: ForkServer, rollout: str, ended: asyncio.Future[int]) -> None:
        self.server = server
        self.rollout = rollout
        self.pid = server.pid  # the server's process group holds every child
        self.killed = False
        self.stderr_tail = ""
        self._answer: str | None = None  # its run.json, read before its home is removed
        self._ended = ended

    @property
    def work(self) -> Path:
        return self.server.home / self.rollout

    @property
    def returncode(self) -> int | None:
        return self._ended.result() if self._ended.done() and not self._ended.exception() else None

    async def wait(self, timeout_s: float | None) -> None:
        await asyncio.wait_for(asyncio.shield(self._ended), timeout_s)

    async def kill(self) -> None:
        """Kill the child's process group (the server does; it is its parent) and wait for it."""
        if not self._ended.done():
            self.killed = True
            await self.server.send({"kill": self.rollout})
            with contextlib.suppress(TimeoutError, HarnessProcessError):
                await asyncio.wait_for(asyncio.shield(self._ended), 10.0)
        with contextlib.suppress(OSError):
            self.stderr_tail = (self.work / "stderr").read_bytes()[-STDERR_TAIL:].decode(errors="replace")
        self._read_answer()

    def _read_answer(self) -> None:
        if self._answer is None:
            with contextlib.suppress(OSError):
                self._answer = (self.work / "run.json").read_text()

    def result(self) -> HarnessRun | None:
        """Its `HarnessRun`, once the block it ran in has ended (None: it was killed first)."""
        if self.returncode == 0:
            self._read_answer()
            try:
                return HarnessRun.model_validate_json(self._answer or "")
            except ValidationError as exc:
                raise HarnessProcessError(f"the harness process answered no run: {exc}") from None
        if self.killed:
            return None
        if self._ended.done() and self._ended.exception() is not None:
            raise HarnessProcessError(str(self._ended.exception()))
        raise HarnessProcessError(f"the harness process failed (exit {self.returncode}):\n{self.stderr_tail}")


class ForkServer:
    """A harness's warm process (see the module's docstring)."""

    def __init__(self, harness: Harness, *, confine: bool, door_socket: Path | None = None) -> None:
        self.harness = harness
        self.confine = confine
        self.door_socket = door_socket
        self.identity = sandbox_identity() if confine else None
        self.home = Path()
        self.pid: int | None = None
        self._work: tempfile.TemporaryDirectory[str] | None = None
        self._proc: asyncio.subprocess.Process | None = None
        self._stderr: Any = None
        self._reader: asyncio.Task[None] | None = None
        self._ended: dict[str, asyncio.Future[int]] = {}
        self._count = 0
        self._write = asyncio.Lock()

    async def start(self) -> ForkServer:
        self._work = tempfile.TemporaryDirectory(prefix="prorl-harness-", ignore_cleanup_errors=True)
        plan = harness_plan(
            self.harness, Path(self._work.name), confine=self.confine, door_socket=self.door_socket,
            module=ZYGOTE,
        )  # fmt: skip
        self.home = plan.home
        self._stderr = tempfile.TemporaryFile(dir=self._work.name)  # noqa: SIM115 (closed in aclose)
        with plan.launch:
            self._proc = await asyncio.create_subprocess_exec(
                *plan.launch.argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=self._stderr,
                cwd=self.home,
                env=plan.env,
                start_new_session=True,
                limit=1 << 20,
                pass_fds=plan.launch.fds,
            )
        self.pid = self._proc.pid
        await self.send({"harness": harness_spec(self.harness)})
        assert self._proc.stdout is not None
        try:
            line = await asyncio.wait_for(self._proc.stdout.readline(), READY_TIMEOUT_S)
        except TimeoutError:
            line = b""
        if json.loads(line or b"{}").get("ready") is not True:
            await self.aclose()
            raise HarnessProcessError(f"the harness's fork server did not start:\n{self._server_log()}")
        self._reader = asyncio.ensure_future(self._read())
        return self

    async def send(self, message: dict[str, Any]) -> None:
        if self._proc is None or self._proc.stdin is None or self._proc.stdin.is_closing():
            raise HarnessProcessError("the harness's fork server is not running")
        async with self._write:
            self._proc.stdin.write(json.dumps(message).encode() + b"\n")
            await self._proc.stdin.drain()

    async def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        try:
            while line := await self._proc.stdout.readline():
                message = json.loads(line)
                future = self._ended.get(str(message.get("ended")))
                if future is not None and not future.done():
                    future.set_result(int(message["status"]))
        finally:  # the server is gone: no child of it runs any more
            error = HarnessProcessError(f"the harness's fork server ended:\n{self._server_log()}")
            for future in self._ended.values():
                if not future.done():
                    future.set_exception(error)
                    future.exception()  # retrieved: a rollout that never waits does not warn

    @contextlib.asynccontextmanager
    async def process(self, request: dict[str, Any]) -> AsyncIterator[ForkedRun]:
        """A forked child running `request` for the block; killed, and its home removed, after."""
        self._count += 1
        # Unguessable: a sibling that learnt the homes' directory still could not name this one
        # (and, confined, each child sees its own home alone).
        rollout = f"r{self._count}-{secrets.token_hex(16)}"
        ended: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._ended[rollout] = ended
        run = ForkedRun(self, rollout, ended)
        try:
            # The request (its door token) goes to the child alone, in a file of its home: the
            # server, which every later rollout is forked from, never holds it.
            run.work.mkdir(mode=0o700)
            fd = os.open(run.work / "request.json", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as handle:
                json.dump(request, handle)
                if self.identity is not None:  # a root service: the child is the sandboxes' user
                    os.fchown(handle.fileno(), self.identity.uid, self.identity.gid)
            if self.identity is not None:
                self.identity.chown(run.work)
            await self.send({"run": rollout})
            yield run
        finally:
            await run.kill()
            self._ended.pop(rollout, None)
            shutil.rmtree(run.work, ignore_errors=True)

    def _server_log(self) -> str:
        if self._stderr is None or self._stderr.closed:
            return ""
        self._stderr.seek(0, os.SEEK_END)
        self._stderr.seek(max(0, self._stderr.tell() - STDERR_TAIL))
        return self._stderr.read().decode(errors="replace")

    async def aclose(self) -> None:
        """End of its input ends it, killing every child; killed with its group if it lingers."""
        proc, self._proc = self._proc, None
        if proc is not None:
            if proc.stdin is not None:
                proc.stdin.close()
            try:
                await asyncio.wait_for(proc.wait(), 10.0)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
                await proc.wait()
        if self._reader is not None:
            with contextlib.suppress(Exception):
                await self._reader
        if self._stderr is not None:
            self._stderr.close()
        if self._work is not None:
            self._work.cleanup()
            self._work = None
