# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Running untrusted test programs fast, each isolated: warm sandboxes with a forking runner.

A `ForkRunner` is one sandbox (bubblewrap by default) holding one warm Python process
(`_forkrunner.py`) that forks a fresh child per test: no interpreter start-up and no sandbox
start-up per test, yet every test gets a pristine process, its own process group, directory and
rlimits, and everything it leaves behind (processes, files in /tmp or the workspace) is removed
before the next test. Such a sandbox is only ever used for tests: never a rollout's RUN sandbox.

`RunnerPool` keeps several runners (default: one per CPU) and recycles each after a number of
tests. `run_in_fresh_sandbox` is the strictest mode: a new sandbox for one program.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import struct
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, Field

from nemo_gym_prorl.sandbox import Sandbox, SandboxLimits, SandboxProcess, SandboxSpec, open_sandbox

logger = logging.getLogger(__name__)

RUNNER_SOURCE = (Path(__file__).with_name("_forkrunner.py")).read_text()
_REPLY_SLACK_S = 15.0  # beyond a test's own timeout, before the runner itself is presumed hung


class RunRequest(BaseModel):
    code: str
    stdin: str = ""
    timeout_s: float = Field(10.0, gt=0, le=3600)
    memory_mb: int = Field(1024, gt=0)
    max_output_bytes: int = Field(64 * 1024, gt=0)
    max_file_mb: int = Field(64, gt=0)
    argv: list[str] = Field(default_factory=lambda: ["solution.py"])


class RunOutcome(BaseModel):
    exit_code: int = -1
    signal: int = 0
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False
    output_truncated: bool = False
    duration_s: float = 0.0
    error_type: str | None = None
    infra_error: str | None = Field(
        None, description="Set when the runner or sandbox failed (not the program): mask, don't grade."
    )

    @property
    def ok(self) -> bool:
        return (
            self.exit_code == 0 and not self.timed_out and not self.output_truncated and not self.infra_error
        )


def default_runner_spec() -> SandboxSpec:
    """Bubblewrap, no network, tight process count; per-test limits are set by the runner."""
    return SandboxSpec(limits=SandboxLimits(wall_time_s=None, memory_mb=8192, max_processes=128))


class RunnerError(RuntimeError):
    pass


class ForkRunner:
    """One warm sandbox + runner process. Requests are served one at a time."""

    def __init__(self, spec: SandboxSpec | None = None) -> None:
        self.spec = spec or default_runner_spec()
        self.sandbox: Sandbox | None = None
        self._proc: SandboxProcess | None = None
        self._lock = asyncio.Lock()
        self.tests_run = 0

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.returncode is None

    async def start(self) -> None:
        if self.alive:
            return
        await self.aclose()
        self.sandbox = open_sandbox(self.spec)
        # The sandbox runtime by default, never the project's venv: the program under test is the
        # policy's, and graders and task data (reference solutions) live in the project's venv.
        self._proc = await self.sandbox.spawn(
            [self.sandbox.python, "-I", "-c", RUNNER_SOURCE, "--wipe-cwd"], stdin=True
        )
        hello = await asyncio.wait_for(self._read(), 60)
        if not hello.get("ready"):
            raise RunnerError(f"runner did not start: {hello}")

    async def _read(self) -> dict:
        assert self._proc is not None and self._proc.stdout is not None
        header = await self._proc.stdout.readexactly(4)
        body = await self._proc.stdout.readexactly(struct.unpack(">I", header)[0])
        return json.loads(body)

    async def run(self, req: RunRequest) -> RunOutcome:
        async with self._lock:
            try:
                await self.start()
                assert self._proc is not None and self._proc.stdin is not None
                data = req.model_dump_json().encode()
                self._proc.stdin.write(struct.pack(">I", len(data)) + data)
                await self._proc.stdin.drain()
                reply = await asyncio.wait_for(self._read(), req.timeout_s + _REPLY_SLACK_S)
            except (
                OSError,
                asyncio.IncompleteReadError,
                TimeoutError,
                RunnerError,
                json.JSONDecodeError,
            ) as exc:
                stderr = ""
                if self._proc is not None and self._proc.stderr is not None:
                    with contextlib.suppress(Exception):
                        stderr = (await asyncio.wait_for(self._proc.stderr.read(4096), 0.2)).decode(
                            errors="replace"
                        )
                await self.aclose()  # next request starts a fresh sandbox
                return RunOutcome(infra_error=f"runner failed: {type(exc).__name__}: {exc} {stderr}".strip())
            self.tests_run += 1
            if "runner_error" in reply:
                await self.aclose()
                return RunOutcome(infra_error=reply["runner_error"])
            return RunOutcome.model_validate(reply)

    async def aclose(self) -> None:
        """Close the sandbox and reap the runner (the next request starts a fresh one)."""
        sandbox, self.sandbox, self._proc = self.sandbox, None, None
        if sandbox is not None:
            await sandbox.aclose()


class RunnerPool:
    """`size` warm runners; a request takes a free one. Each is recycled (fresh sandbox) after
    `recycle_after` tests, as defence in depth on top of the per-test cleanup."""

    def __init__(
        self, size: int | None = None, spec: SandboxSpec | None = None, recycle_after: int | None = 1000
    ) -> None:
        self.size = size or max(1, os.cpu_count() or 1)
        self.spec = spec or default_runner_spec()
        self.recycle_after = recycle_after
        self._free: asyncio.Queue[ForkRunner] | None = None
        self._all: list[ForkRunner] = []
        self._closed = False

    def _queue(self) -> asyncio.Queue[ForkRunner]:
        if self._free is None:
            self._free = asyncio.Queue()
            for _ in range(self.size):
                runner = ForkRunner(self.spec)
                self._all.append(runner)
                self._free.put_nowait(runner)
        return self._free

    async def warm_up(self) -> None:
        queue = self._queue()
        await asyncio.gather(*(r.start() for r in self._all))
        del queue

    async def run(self, req: RunRequest) -> RunOutcome:
        if self._closed:
            return RunOutcome(infra_error="runner pool is closed")
        queue = self._queue()
        runner = await queue.get()
        try:
            outcome = await runner.run(req)
            if self.recycle_after and runner.tests_run >= self.recycle_after:
                await runner.aclose()
                runner.tests_run = 0
            return outcome
        finally:
            queue.put_nowait(runner)

    async def run_many(self, reqs: Sequence[RunRequest]) -> list[RunOutcome]:
        return list(await asyncio.gather(*(self.run(r) for r in reqs)))

    async def aclose(self) -> None:
        self._closed = True
        await asyncio.gather(*(runner.aclose() for runner in self._all))


async def run_in_fresh_sandbox(
    reqs: Sequence[RunRequest], spec: SandboxSpec | None = None
) -> list[RunOutcome]:
    """The strictest mode: a new sandbox (and runner) for this batch only, closed afterwards."""
    runner = ForkRunner(spec)
    try:
        return [await runner.run(r) for r in reqs]
    finally:
        await runner.aclose()
