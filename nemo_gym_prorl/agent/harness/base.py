# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""What every harness is given and gives back.

A harness runs in a worker thread (the ones people deploy are synchronous programs). It reaches
the policy only through `HarnessTask.base_url` with `api_key` (the rollout's door on the
recording endpoint) and runs commands only through `HarnessTask.commands`, which executes them
in the rollout's sandbox: the harness's own code runs beside the sandbox, never inside it, and
everything the policy writes runs inside it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

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


class SandboxCommands:
    """Runs a harness's commands through the rollout's `CommandExecutor`, from the harness's
    thread, on the event loop that owns the rollout; records each as a `ToolStep`.

    Standard input is empty: a command that reads the terminal (`cat`, `uniq`, `python` typed
    bare) reads end-of-file at once instead of waiting out its time limit."""

    def __init__(
        self,
        executor: CommandExecutor,
        loop: asyncio.AbstractEventLoop,
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

    def run(self, command: str, *, cwd: str | None = None, timeout_s: float | None = None) -> ExecResult:
        started = time.monotonic()
        limit = min(timeout_s or self.timeout_s, self.timeout_s)
        future = asyncio.run_coroutine_threadsafe(
            self.executor.exec(command, cwd=cwd, timeout_s=limit), self.loop
        )
        result = future.result()
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


@dataclass
class HarnessTask:
    """One rollout as a harness sees it."""

    prompt: str  # the task statement, as the harness's own instance template takes it
    base_url: str  # an OpenAI-compatible base URL (ends in /v1)
    api_key: str
    model: str
    commands: SandboxCommands
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
