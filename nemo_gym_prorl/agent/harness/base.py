# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""What every harness is given and gives back.

A harness runs in a process of its own (`agent.harness.process`; the ones people deploy are
synchronous programs), started with a minimal environment and, where bubblewrap works, a
filesystem of its own. It reaches the policy only through `HarnessTask.base_url` with `api_key`
(the rollout's door on the recording endpoint) and runs commands only through
`HarnessTask.commands`: `RemoteCommands` posts each to the same door, where the service's
`SandboxCommands` runs it in the rollout's sandbox and records it. The harness's own code runs
beside the sandbox, never inside it, and everything the policy writes runs inside it.

Besides `name` and `run`, a harness may define `environment(home) -> dict[str, str]` (settings
of its own for its process's environment, `home` being its private home directory) and `files`
(paths outside the project and its interpreter that its process reads, shown to it read-only).
Its process rebuilds it from its class and its `options` (a pydantic model), so both must be
importable by name.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx
from pydantic import BaseModel

from nemo_gym_prorl.agent.loop import StopReason, ToolStep
from nemo_gym_prorl.sandbox.base import ExecResult, Sandbox


class CommandExecutor(Protocol):
    """Runs one command to completion in a rollout's sandbox: a fresh `bash -c`, empty standard
    input, output captured and capped. `cwd=None`: the sandbox's workspace."""

    async def exec(self, command: str, *, cwd: str | None, timeout_s: float) -> ExecResult: ...


class SandboxExecutor:
    """`CommandExecutor` over a sandbox this process holds."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox

    async def exec(self, command: str, *, cwd: str | None, timeout_s: float) -> ExecResult:
        return await self.sandbox.exec(["/bin/bash", "-c", command], cwd=cwd, timeout=timeout_s, stdin=b"")


class Commands(Protocol):
    """How a harness runs a command in its rollout's sandbox."""

    timeout_s: float  # the longest a command may run

    def run(self, command: str, *, cwd: str | None = None, timeout_s: float | None = None) -> ExecResult: ...


class CommandsClosed(RuntimeError):
    """The rollout has ended (its time is up): it runs no more commands."""


class SandboxCommands:
    """Runs a rollout's commands through its `CommandExecutor`, on the event loop that owns the
    rollout, and records each as a `ToolStep`: `arun` from that loop (the recording endpoint's
    command route), `run` from a harness's thread.

    Standard input is empty: a command that reads the terminal (`cat`, `uniq`, `python` typed
    bare) reads end-of-file at once instead of waiting out its time limit. A command runs to its
    own end even when the request that asked for it goes away; `drain` waits for those running."""

    def __init__(
        self,
        executor: CommandExecutor,
        loop: asyncio.AbstractEventLoop | None = None,
        *,
        timeout_s: float,
        turn: Callable[[], int] = lambda: 0,
        tool: str = "bash",
    ) -> None:
        self.executor = executor
        self.loop = loop
        self.timeout_s = timeout_s
        self.turn = turn  # the model call whose command runs now
        self.tool = tool
        self.steps: list[ToolStep] = []
        self.closed = False
        self._running: set[asyncio.Future[ExecResult]] = set()

    async def arun(
        self, command: str, *, cwd: str | None = None, timeout_s: float | None = None
    ) -> ExecResult:
        if self.closed:
            raise CommandsClosed("this rollout has ended: it runs no more commands")
        work = asyncio.ensure_future(
            self._exec(command, cwd, min(timeout_s or self.timeout_s, self.timeout_s))
        )
        self._running.add(work)
        work.add_done_callback(self._running.discard)
        return await asyncio.shield(work)

    async def _exec(self, command: str, cwd: str | None, limit: float) -> ExecResult:
        started = time.monotonic()
        result = await self.executor.exec(command, cwd=cwd, timeout_s=limit)
        self.steps.append(
            ToolStep(
                turn=self.turn(),
                call_id=f"cmd_{len(self.steps)}",
                name=self.tool,
                arguments={"command": command},
                observation=result.stdout + result.stderr,
                is_error=not result.ok,
                duration_s=time.monotonic() - started,
            )
        )
        return result

    def run(self, command: str, *, cwd: str | None = None, timeout_s: float | None = None) -> ExecResult:
        if self.loop is None:
            raise RuntimeError("SandboxCommands.run needs the loop that owns the rollout")
        return asyncio.run_coroutine_threadsafe(
            self.arun(command, cwd=cwd, timeout_s=timeout_s), self.loop
        ).result()

    def close(self) -> None:
        """Refuse later commands (those running go on to their own end)."""
        self.closed = True

    async def drain(self, *, cancel: bool = False) -> None:
        """Wait for the commands still running (`cancel`: stop waiting for them)."""
        running = list(self._running)
        if cancel:
            for work in running:
                work.cancel()
        if running:
            await asyncio.wait(running)


class RemoteCommands:
    """`Commands` of a harness in its own process: each command is posted to the rollout's door
    (`POST <url>`, `{command, cwd, timeout_s}`, with the door's token), which runs it in the
    sandbox and records it. A refused command (the rollout has ended) raises `CommandsClosed`."""

    def __init__(self, url: str, token: str, *, timeout_s: float) -> None:
        self.url = url
        self.timeout_s = timeout_s
        self.steps: list[ToolStep] = []  # recorded by the service, not here
        self._http = httpx.Client(
            headers={"Authorization": f"Bearer {token}"},
            timeout=httpx.Timeout(timeout_s + 60.0, connect=10.0),
            trust_env=False,  # loopback: never a proxy
        )

    def run(self, command: str, *, cwd: str | None = None, timeout_s: float | None = None) -> ExecResult:
        response = self._http.post(self.url, json={"command": command, "cwd": cwd, "timeout_s": timeout_s})
        if response.status_code != 200:
            raise CommandsClosed(f"the command was refused ({response.status_code}): {response.text[:500]}")
        return ExecResult.model_validate(response.json())

    def close(self) -> None:
        self._http.close()


@dataclass
class HarnessTask:
    """One rollout as a harness sees it."""

    prompt: str  # the task statement, as the harness's own instance template takes it
    base_url: str  # an OpenAI-compatible base URL (ends in /v1)
    api_key: str
    model: str
    commands: Commands
    max_calls: int
    extra: dict[str, Any] = field(default_factory=dict)  # `model_kwargs`: the harness model client's own


class HarnessRun(BaseModel):
    """How a harness ended, in its own words and in the project's."""

    name: str  # the harness
    stop_reason: StopReason
    exit_status: str  # the harness's own (mini-swe-agent: Submitted, LimitsExceeded, ...)
    submission: str | None = None
    generated_tokens: int | None = None  # as the harness's own model client counted them (the server's usage)
    messages: list[
        dict[str, Any]
    ]  # the harness's conversation, as it sent it ([]: the endpoint's record of it)


class Harness(Protocol):
    """A harness: `run(task)` drives one rollout to its end, in the calling thread. It raises
    only for its own defects; the model's mistakes and refused calls end the run normally."""

    name: str

    def run(self, task: HarnessTask) -> HarnessRun: ...
