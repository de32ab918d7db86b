# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The RUN stage of a harness rollout: open the rollout's door on the recording endpoint, run
the harness in a worker thread against it and the rollout's sandbox, close the door, and turn
what was recorded into the same `AgentTrajectory` the built-in loop produces.

The budgets are the built-in loop's (`AgentLimits`): `max_turns` model calls (the harness's own
step limit is lowered to it, and the endpoint refuses a call past it), `max_time_s` of wall
clock (at its end the door closes: the harness's next call is refused and it ends; the command it
may be running ends by its own time limit). The harness thread has always ended when `run`
returns.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any

from nemo_gym_prorl.agent.harness.base import CommandExecutor, Harness, HarnessTask, SandboxCommands
from nemo_gym_prorl.agent.harness.endpoint import RecordingEndpoint
from nemo_gym_prorl.agent.harness.trajectory import agent_trajectory
from nemo_gym_prorl.agent.loop import AgentLimits, AgentTrajectory
from nemo_gym_prorl.agent.prompts import PromptError, row_messages
from nemo_gym_prorl.llm.access import LLMAccess
from nemo_gym_prorl.llm.recording import RecordingSession
from nemo_gym_prorl.pipeline.handler import RolloutFailure
from nemo_gym_prorl.pipeline.job import Job


def task_statement(row: Mapping[str, Any]) -> str:
    """What a harness is asked to do: a SWE row's problem statement, else the row's user text.
    (The harness writes its own system prompt and instructions around it.)"""
    statement = row.get("problem_statement")
    if isinstance(statement, str) and statement.strip():
        return statement
    try:
        users = [m.content or "" for m in row_messages(row) if m.role == "user"]
    except PromptError as exc:
        raise RolloutFailure("data", f"cannot build the task statement: {exc}") from exc
    return "\n\n".join(users)


class HarnessRunner:
    """Runs one harness for every rollout of a handler; one recording endpoint per process,
    started in the serving event loop on first use."""

    def __init__(self, harness: Harness, *, command_timeout_s: float = 60.0) -> None:
        self.harness = harness
        self.command_timeout_s = command_timeout_s
        self._endpoint: RecordingEndpoint | None = None
        self._starting = asyncio.Lock()

    async def endpoint(self) -> RecordingEndpoint:
        async with self._starting:
            if self._endpoint is None:
                self._endpoint = await RecordingEndpoint().start()
        return self._endpoint

    async def aclose(self) -> None:
        if self._endpoint is not None:
            endpoint, self._endpoint = self._endpoint, None
            await endpoint.aclose()

    async def run(
        self, job: Job, executor: CommandExecutor, llm: LLMAccess, limits: AgentLimits
    ) -> AgentTrajectory:
        started = time.monotonic()
        endpoint = await self.endpoint()
        session = RecordingSession(
            llm,
            sampling=llm.sampling_for(job.sampling_params),
            trajectory_id=job.id,
            max_calls=limits.max_turns,
        )
        commands = SandboxCommands(
            executor,
            asyncio.get_running_loop(),
            timeout_s=self.command_timeout_s,
            turn=lambda: max(session.calls - 1, 0),
        )
        model = await llm.model_name()
        timed_out = False
        with endpoint.opened(session) as door:
            task = HarnessTask(
                prompt=task_statement(job.instance),
                base_url=door.base_url,
                api_key=door.token,
                model=model,
                commands=commands,
                max_calls=limits.max_turns,
            )
            work = asyncio.ensure_future(asyncio.to_thread(self.harness.run, task))
            try:
                run = await asyncio.wait_for(asyncio.shield(work), limits.max_time_s)
            except TimeoutError:
                timed_out = True
                session.close()  # its next call is refused; the harness ends
                run = await work
        if not run.messages:  # a harness that keeps no chat messages of its own
            run = run.model_copy(update={"messages": session.conversation})
        return agent_trajectory(
            run, session.record(), commands, limits, seconds=time.monotonic() - started, timed_out=timed_out
        )
