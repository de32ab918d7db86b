# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Scripted handlers for tests and benchmarks: stage durations and failures come from a script,
not from a model. They are never wired in by default; a config names them explicitly.

`ScriptedHandler` is pure asyncio (cheap: 1,000s of jobs in seconds). `SandboxScriptedHandler`
opens a real sandbox in INIT, runs real tool processes in RUN and a real "test" process in EVAL,
with scripted think-time in between: the workload of `benchmarks/bench_pipeline.py`.

Per job, `instance["script"]` may override any default: `init_s`, `run_s`, `eval_s`, `fail`
("init"|"run"|"eval"), `reward`, `turns`, `keepalive` (spawn a long-lived process in INIT),
`slot_wait_s` (RUN first waits this long as a turn waits for a model slot, told as the balancer
tells it).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from nemo_gym_prorl.llm.slot_wait import waiting_for_slot
from nemo_gym_prorl.pipeline.job import Evaluation, Job, Stage, Trajectory
from nemo_gym_prorl.sandbox import Sandbox, SandboxSpec, open_sandbox

if TYPE_CHECKING:
    from nemo_gym_prorl.agent.deps import HandlerDeps

# `prorl serve` overrides that select the `tasks=scripted` group (scripted and scripted_sandbox);
# the group lives with the tests, not among the shipped configs.
SCRIPTED_TASKS = [
    f"hydra.searchpath=[file://{Path(__file__).with_name('service_configs')}]",
    "tasks=scripted",
]


class Script(BaseModel):
    model_config = ConfigDict(extra="forbid")

    init_s: float = Field(0.0, ge=0, le=3600)
    run_s: float = Field(0.0, ge=0, le=3600)
    eval_s: float = Field(0.0, ge=0, le=3600)
    fail: Stage | None = None
    reward: float = 1.0
    turns: int = Field(1, ge=1, le=100)
    keepalive: bool = False
    slot_wait_s: float = Field(0.0, ge=0, le=3600)

    def merged(self, job: Job) -> Script:
        override = job.instance.get("script")
        if not override:
            return self
        return self.model_validate({**self.model_dump(), **override})


class ScriptFailureError(RuntimeError):
    pass


class ScriptedState:
    def __init__(self, job_id: str, script: Script) -> None:
        self.job_id = job_id
        self.script = script
        self.sandbox: Sandbox | None = None
        self.outputs: list[str] = []


class ScriptedHandler:
    """Sleeps for the scripted durations; records which states are alive (for leak checks)."""

    def __init__(
        self,
        *,
        eval_needs_run_state: bool = True,
        gen_slots: asyncio.Semaphore | None = None,
        track: bool = True,
        policy_version: Callable[[], int] | None = None,
        **defaults: Any,
    ) -> None:
        self.eval_needs_run_state = eval_needs_run_state
        self.track = track  # per-job history for tests; off for long runs (it grows per job)
        self.defaults = Script.model_validate(defaults)
        self.gen_slots = gen_slots  # RUN holds one (models a bounded generation concurrency)
        # The policy version a RUN samples with, read when it starts (like a turn's version);
        # None: the trainer's step the job carries, as a real handler records it.
        self.policy_version = policy_version
        self.live: set[str] = set()
        self.released: list[str] = []
        self.entered: dict[Stage, list[str]] = {stage: [] for stage in Stage}
        self.eval_states: dict[str, ScriptedState | None] = {}

    def _maybe_fail(self, script: Script, stage: Stage) -> None:
        if script.fail == stage:
            raise ScriptFailureError(f"scripted failure in {stage}")

    def _enter(self, stage: Stage, job_id: str) -> None:
        if self.track:
            self.entered[stage].append(job_id)

    async def init(self, job: Job) -> ScriptedState:
        self._enter(Stage.INIT, job.id)
        script = self.defaults.merged(job)
        state = ScriptedState(job.id, script)
        await self._setup(state)
        try:
            await asyncio.sleep(script.init_s)
            self._maybe_fail(script, Stage.INIT)
        except BaseException:
            await self._teardown(state)  # init failed: nobody else will release it
            raise
        self.live.add(job.id)
        return state

    async def run(self, job: Job, state: ScriptedState) -> Trajectory:
        self._enter(Stage.RUN, job.id)
        if self.gen_slots is None:
            return await self._run_turns(job, state)
        async with self.gen_slots:
            return await self._run_turns(job, state)

    async def _run_turns(self, job: Job, state: ScriptedState) -> Trajectory:
        script = state.script
        version = self.policy_version() if self.policy_version is not None else job.policy_version or 0
        messages: list[dict[str, Any]] = []
        think = script.run_s / script.turns
        if script.slot_wait_s:
            with waiting_for_slot():
                await asyncio.sleep(script.slot_wait_s)
        for turn in range(script.turns):
            started = time.monotonic()
            observation = await self._tool_call(state, f"turn {turn}")
            # Think-time tops the turn up to its scripted length (tool time included).
            await asyncio.sleep(max(0.0, think - (time.monotonic() - started)))
            messages.append({"role": "tool", "content": observation})
        self._maybe_fail(script, Stage.RUN)
        return Trajectory(
            messages=messages, finish=True, end_properly=True, stop_reason="finish", policy_versions=[version]
        )

    async def evaluate(self, job: Job, state: ScriptedState | None, trajectory: Trajectory) -> Evaluation:
        self._enter(Stage.EVAL, job.id)
        if self.track:
            self.eval_states[job.id] = state
        script = self.defaults.merged(job)
        await self._slow_test(state, script.eval_s)
        self._maybe_fail(script, Stage.EVAL)
        return Evaluation(
            reward=script.reward,
            reward_components={"scripted": script.reward},
            resolved=script.reward > 0,
            report={"turns": len(trajectory.messages)},
        )

    async def release(self, state: ScriptedState) -> None:
        if state.job_id in self.live:
            self.live.discard(state.job_id)
            if self.track:
                self.released.append(state.job_id)
        await self._teardown(state)

    # -- hooks for the sandbox variant ------------------------------------------------------
    async def _setup(self, state: ScriptedState) -> None:
        pass

    async def _teardown(self, state: ScriptedState) -> None:
        pass

    async def _tool_call(self, state: ScriptedState, text: str) -> str:
        return text

    async def _slow_test(self, state: ScriptedState | None, seconds: float) -> None:
        await asyncio.sleep(seconds)


class SandboxScriptedHandler(ScriptedHandler):
    """The same script over real sandboxes: INIT opens one and runs a setup process, RUN's tool
    calls are processes in it, EVAL's test is a process (`sleep`) in it.

    `record_file`: one JSON line per sandbox (job, sandbox id, pids cgroup, process ids), so a
    test can check after a `kill -9` that nothing it started is still alive.
    """

    def __init__(
        self, *, sandbox: SandboxSpec | None = None, record_file: str | None = None, **kw: Any
    ) -> None:
        super().__init__(**kw)
        self.spec = sandbox or SandboxSpec()
        self.record_file = Path(record_file) if record_file else None

    async def _setup(self, state: ScriptedState) -> None:
        sandbox = open_sandbox(self.spec)
        state.sandbox = sandbox
        try:
            pids: list[int] = []
            setup = await sandbox.exec(["/bin/sh", "-c", "echo ready > setup.txt"], timeout=30)
            if not setup.ok:
                raise RuntimeError(f"sandbox setup failed: {setup.stderr.strip()}")
            if state.script.keepalive:
                proc = await sandbox.spawn(["sleep", "3600"])
                pids.append(proc.pid)
            if self.record_file is not None:
                cgroup = sandbox.cgroup_path  # test bookkeeping only
                line = {
                    "job": state.job_id,
                    "sandbox": sandbox.id,
                    "dir": str(sandbox.workspace.parent),
                    "cgroup": str(cgroup) if cgroup is not None else None,
                    "pids": pids,
                    "opener": os.getpid(),  # which process opened it (the service or a worker)
                }
                with self.record_file.open("a") as fh:
                    fh.write(json.dumps(line) + "\n")
        except BaseException:
            sandbox.close()
            raise

    async def _teardown(self, state: ScriptedState) -> None:
        if state.sandbox is not None:
            state.sandbox.close()

    async def _tool_call(self, state: ScriptedState, text: str) -> str:
        assert state.sandbox is not None
        result = await state.sandbox.exec(["echo", text], timeout=30)
        return result.stdout.strip()

    async def _slow_test(self, state: ScriptedState | None, seconds: float) -> None:
        if state is None or state.sandbox is None or seconds <= 0:
            await asyncio.sleep(seconds)
            return
        result = await state.sandbox.exec(["sleep", f"{seconds:.3f}"], timeout=seconds + 30)
        if not result.ok:
            raise RuntimeError(f"test process failed: {result.exit_code} {result.stderr.strip()}")


def build_scripted(deps: HandlerDeps, **options: Any) -> ScriptedHandler:
    """Factory for `tasks.<name>.handler` in the service config (tests and benchmarks)."""
    return ScriptedHandler(**options)


def build_sandbox_scripted(deps: HandlerDeps, **options: Any) -> SandboxScriptedHandler:
    """Factory using the service's configured sandbox backend."""
    return SandboxScriptedHandler(sandbox=deps.sandbox, **options)
