# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The RUN stage of a harness rollout: open the rollout's door on the recording endpoint, run
the harness in a process of its own (`agent.harness.process`) against it, close the door, and
turn what was recorded into the same `AgentTrajectory` the built-in loop produces.

The harness's process holds the rollout's door (base URL and token) and nothing else of the
service's: its model calls go to the door's `/v1`, its commands to the door's `/commands`, which
runs them in the rollout's sandbox and records them. At most `max_processes` harness processes
run at once (per runner); a rollout waits for a slot before its process starts.

The budgets are the built-in loop's (`AgentLimits`): `max_turns` model calls (the harness's own
step limit is lowered to it, and the endpoint refuses a call past it), `max_time_s` of wall
clock from the start of the harness's process (time waiting for a slot does not count). At its
end the door refuses the harness's next call and command, so it ends on its own; after
`kill_grace_s` more it is killed. The harness's process and everything it started have always
been killed and reaped when `run` returns or is cancelled, and the commands it asked for have
ended.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Mapping
from typing import Any

from nemo_gym_prorl.agent.harness.base import CommandExecutor, Harness, HarnessRun, SandboxCommands
from nemo_gym_prorl.agent.harness.capture_store import CaptureStore
from nemo_gym_prorl.agent.harness.endpoint import RecordingEndpoint
from nemo_gym_prorl.agent.harness.forkserver import ForkServer
from nemo_gym_prorl.agent.harness.gym_capture import HarnessCapture
from nemo_gym_prorl.agent.harness.process import bubblewrap_works, default_max_processes, harness_process
from nemo_gym_prorl.agent.harness.trajectory import agent_trajectory, scored_call_id
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
    """Runs one harness for every rollout of a handler, each in a process of its own; one
    recording endpoint per service process, started in the serving event loop on first use.

    `max_processes`: harness processes at once (default: `default_max_processes()`).
    `confine`: run them in bubblewrap (None: where it works; the service logs it where not).
    `warm`: fork each rollout's process from the harness's warm fork server (`forkserver`),
    which made the harness's imports once, rather than start a new interpreter per rollout.

    Every call a rollout's harness makes is written, as it is answered, as a NeMo Gym token-capture
    record to `capture` (the process's one store), and the rollout's sample is what Gym's builder
    delivers from those records (`agent.harness.gym_capture`)."""

    def __init__(
        self,
        harness: Harness,
        *,
        command_timeout_s: float = 60.0,
        max_processes: int | None = None,
        confine: bool | None = None,
        kill_grace_s: float = 5.0,
        warm: bool = True,
        capture: CaptureStore | None = None,
    ) -> None:
        self.harness = harness
        self.capture = capture or CaptureStore()
        self.command_timeout_s = command_timeout_s
        self.max_processes = max_processes or default_max_processes()
        self.confine = confine
        self.kill_grace_s = kill_grace_s
        self.warm = warm
        self._server: ForkServer | None = None
        self.processes: dict[str, int] = {}  # job id -> the process group of its running harness
        self._endpoint: RecordingEndpoint | None = None
        self._starting = asyncio.Lock()
        self._slots: asyncio.Semaphore | None = None

    async def endpoint(self) -> RecordingEndpoint:
        async with self._starting:
            if self._endpoint is None:
                self._endpoint = await RecordingEndpoint().start()
            if self.confine is None:
                self.confine = await asyncio.to_thread(bubblewrap_works)
                if not self.confine:
                    logging.getLogger(__name__).warning(
                        "bubblewrap does not work here: harness processes run unconfined "
                        "(their own environment, but the service user's files)"
                    )
            if self._slots is None:
                self._slots = asyncio.Semaphore(self.max_processes)
        return self._endpoint

    async def server(self) -> ForkServer | None:
        """The harness's warm fork server, started by the first rollout (None: not `warm`)."""
        endpoint = await self.endpoint()  # which decides whether harness processes are confined
        async with self._starting:
            if self.warm and self._server is None:
                self._server = await ForkServer(
                    self.harness, confine=bool(self.confine), door_socket=endpoint.socket_path
                ).start()
        return self._server

    async def aclose(self) -> None:
        if self._server is not None:
            server, self._server = self._server, None
            await server.aclose()
        if self._endpoint is not None:
            endpoint, self._endpoint = self._endpoint, None
            await endpoint.aclose()

    async def run(
        self, job: Job, executor: CommandExecutor, llm: LLMAccess, limits: AgentLimits
    ) -> AgentTrajectory:
        prompt = task_statement(job.instance)
        endpoint = await self.endpoint()
        server = await self.server()
        model = await llm.model_name()
        assert self._slots is not None
        async with self._slots:
            started = time.monotonic()
            capture = HarnessCapture(self.capture, trajectory_id=job.id, model=model)
            session = RecordingSession(
                llm,
                sampling=llm.sampling_for(job.sampling_params),
                trajectory_id=job.id,
                max_calls=limits.max_turns,
                on_turn=capture.write,
            )
            commands = SandboxCommands(
                executor, timeout_s=self.command_timeout_s, turn=lambda: max(session.calls - 1, 0)
            )
            timed_out = False
            try:
                with endpoint.opened(session, commands) as door:
                    request = {
                        "task": {
                            "prompt": prompt,
                            "base_url": door.base_url,
                            "api_key": door.token,
                            "model": model,
                            "max_calls": limits.max_turns,
                        },
                        "commands": {
                            "url": door.commands_url,
                            "token": door.token,
                            "timeout_s": self.command_timeout_s,
                        },
                    }
                    try:
                        launched = (
                            server.process(request)
                            if server is not None
                            else harness_process(
                                self.harness,
                                request,
                                confine=bool(self.confine),
                                door_socket=endpoint.socket_path,
                            )
                        )
                        async with launched as process:
                            self.processes[job.id] = process.pid
                            started = time.monotonic()  # the budget runs from the process's start
                            try:
                                await process.wait(limits.max_time_s)
                            except TimeoutError:
                                timed_out = True
                                # Its next call and command are refused: it ends on its own, or is killed.
                                session.close()
                                commands.close()
                                with contextlib.suppress(TimeoutError):
                                    await process.wait(self.kill_grace_s)
                    finally:
                        self.processes.pop(job.id, None)
                    run = process.result()
                    async with door.lock:  # a call it left unanswered has been answered
                        pass
            except BaseException as exc:
                capture.discard()  # this attempt's records: a requeued rollout writes its own
                commands.close()
                await commands.drain(cancel=isinstance(exc, asyncio.CancelledError))
                raise
            commands.close()
            await commands.drain()  # a command it left running ends by its own time limit
        if run is None:  # killed before it answered: the endpoint's record is all there is
            run = HarnessRun(
                name=self.harness.name, stop_reason="time_budget", exit_status="Killed", messages=[]
            )
        if not run.messages:  # a harness that keeps no chat messages of its own
            run = run.model_copy(update={"messages": session.conversation})
        seconds = time.monotonic() - started
        record = session.record()
        delivery = await capture.deliver(scored_call_id(run, record))
        return agent_trajectory(
            run,
            record,
            commands,
            limits,
            seconds=seconds,
            timed_out=timed_out,
            delivery=delivery,
        )
