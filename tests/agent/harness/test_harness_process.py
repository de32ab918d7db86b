# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The harness's own process: what it holds (an environment of its own: no token of the
service's, no other rollout's, not even its own), its commands through the door's `/commands`,
the bounded pool (a rollout's time budget runs from its process's start, not while it waits for
a slot), and nothing left running after a rollout that timed out or was cancelled.

A harness of the tests (`probe_harness.ProbeHarness`) reports what its process holds; the
process tree is read from /proc beside it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from harness_helpers import ScriptedLLM, harness_job, prompt_row
from probe_harness import ProbeHarness, ProbeOptions

from nemo_gym_prorl.agent.harness.base import SandboxCommands
from nemo_gym_prorl.agent.harness.process import CHILD
from nemo_gym_prorl.agent.harness.runner import HarnessRunner
from nemo_gym_prorl.agent.loop import AgentLimits, AgentTrajectory
from nemo_gym_prorl.llm.recording import RecordingSession
from nemo_gym_prorl.llm.records import SamplingParams
from nemo_gym_prorl.pipeline.job import Job
from nemo_gym_prorl.sandbox.base import ExecResult

API_TOKEN = "prorl-api-token-" + os.urandom(8).hex()


class EchoExecutor:
    """A rollout's commands without a sandbox: each answers its own text."""

    def __init__(self) -> None:
        self.commands: list[str] = []

    async def exec(self, command: str, *, cwd: str | None, timeout_s: float) -> ExecResult:
        self.commands.append(command)
        return ExecResult(exit_code=0, stdout=f"ran: {command}\n", stderr="", duration_s=0.0)


def job(name: str) -> Job:
    return harness_job(prompt_row("Report."), name)


def report(agent: AgentTrajectory) -> dict[str, Any]:
    assert agent.final_answer is not None, agent
    return json.loads(agent.final_answer)


def descendants(pid: int) -> list[int]:
    """`pid` and every process under it (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                stat = (entry / "stat").read_text()
                parent = int(stat.rsplit(")", 1)[1].split()[1])
                children.setdefault(parent, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo += children.get(current, [])
    return found


def running(pid: int) -> bool:
    """Whether `pid` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def proc_text(pid: int) -> bytes:
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/environ").read_bytes() + Path(f"/proc/{pid}/cmdline").read_bytes()
    return b""


async def harness_tree(runner: HarnessRunner, job_id: str, *, sleeps: int = 0) -> list[int]:
    """The running harness process's tree, once the harness itself (and `sleeps` children of
    its) has started."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        pid = runner.processes.get(job_id)
        if pid is not None:
            tree = descendants(pid)
            cmdlines = [proc_text(p) for p in tree]
            if (
                any(CHILD.encode() in c for c in cmdlines)
                and sum(b"sleep\x001000" in c for c in cmdlines) >= sleeps
            ):
                return tree
        await asyncio.sleep(0.05)
    raise AssertionError("the harness process did not start")


async def test_the_harness_process_holds_no_token_and_nothing_of_the_services_environment(
    scripted_llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PRORL_API_TOKEN", API_TOKEN)  # as under `prorl serve`
    monkeypatch.setenv("PRORL_SERVICE_ONLY", "service-only")
    llm = await scripted_llm("unused")
    runner = HarnessRunner(ProbeHarness(ProbeOptions(command="echo hi", sleep_s=1.0)), warm=False)
    endpoint = await runner.endpoint()
    executor = EchoExecutor()
    with endpoint.opened(RecordingSession(llm, sampling=SamplingParams())) as other:  # another rollout
        work = asyncio.ensure_future(runner.run(job("env"), executor, llm, AgentLimits(max_turns=2)))
        tree = await harness_tree(runner, "env")
        (own,) = [d for d in endpoint.doors.values() if d is not other]
        seen = {pid: proc_text(pid) for pid in tree}
        agent = await work
    await runner.aclose()

    env = report(agent)["env"]
    assert "PRORL_API_TOKEN" not in env and "PRORL_SERVICE_ONLY" not in env
    allowed = {"PATH", "HOME", "TMPDIR", "LANG", "PWD", "PYTHONPATH", "PYTHONSAFEPATH"}
    allowed |= {"PRORL_DOOR_SOCKET", "PRORL_HARNESS_CONFINED"}  # where its door is, inside; a flag
    assert set(env) <= allowed, env
    assert env["HOME"] != str(Path.home()) and Path(env["HOME"]).name == "home"
    # No token in its environment, nor in any environment or command line of its process tree:
    # its own arrived on its standard input.
    for secret in (API_TOKEN, other.token, own.token):
        assert secret not in json.dumps(env)
        assert not [pid for pid, text in seen.items() if secret.encode() in text]
    # Its command ran through the door's /commands and was recorded as the rollout's step.
    assert executor.commands == ["echo hi"] and report(agent)["command"] == "ran: echo hi\n"
    assert [s.arguments for s in agent.steps] == [{"command": "echo hi"}]
    assert not any(running(pid) for pid in tree)


async def test_the_commands_route_answers_only_its_rollouts_token(scripted_llm: ScriptedLLM) -> None:
    llm = await scripted_llm("unused")
    runner = HarnessRunner(ProbeHarness())
    endpoint = await runner.endpoint()
    commands = SandboxCommands(EchoExecutor(), timeout_s=5.0)
    with (
        endpoint.opened(RecordingSession(llm, sampling=SamplingParams()), commands) as door,
        endpoint.opened(RecordingSession(llm, sampling=SamplingParams())) as other,
    ):
        async with httpx.AsyncClient() as http:
            body = {"command": "ls", "timeout_s": 100}
            own = {"Authorization": f"Bearer {door.token}"}
            assert (await http.post(door.commands_url, json=body)).status_code == 401
            wrong = {"Authorization": f"Bearer {other.token}"}
            assert (await http.post(door.commands_url, json=body, headers=wrong)).status_code == 401
            # a door opened without commands runs none
            mine = {"Authorization": f"Bearer {other.token}"}
            assert (await http.post(other.commands_url, json=body, headers=mine)).status_code == 404
            assert (await http.post(door.commands_url, json={"cmd": "ls"}, headers=own)).status_code == 400
            answer = await http.post(door.commands_url, json=body, headers=own)
            assert answer.status_code == 200
            assert answer.json()["stdout"] == "ran: ls\n" and answer.json()["exit_code"] == 0
            commands.close()  # the rollout's time is up
            assert (await http.post(door.commands_url, json=body, headers=own)).status_code == 403
    async with httpx.AsyncClient() as http:
        ended = await http.post(door.commands_url, json=body, headers=own)
    assert ended.status_code == 404
    assert [s.arguments for s in commands.steps] == [{"command": "ls"}]
    await runner.aclose()


async def test_a_rollouts_time_budget_starts_with_its_process_not_in_the_queue(
    scripted_llm: ScriptedLLM,
) -> None:
    llm = await scripted_llm("unused")
    runner = HarnessRunner(ProbeHarness(ProbeOptions(sleep_s=12.0)), max_processes=1, warm=False)
    first = asyncio.ensure_future(
        runner.run(job("first"), EchoExecutor(), llm, AgentLimits(max_turns=2, max_time_s=60.0))
    )
    await harness_tree(runner, "first")  # the one slot is taken, for 12 s more
    runner.harness = ProbeHarness(ProbeOptions(sleep_s=1.0))
    limits = AgentLimits(max_turns=2, max_time_s=10.0)
    started = time.monotonic()
    second = await runner.run(job("second"), EchoExecutor(), llm, limits)
    waited = time.monotonic() - started
    await first
    await runner.aclose()
    assert report(first.result())["ended"] <= report(second)["started"]  # it waited for the slot
    # Queued and run, it took longer than its budget and was not cut short: its budget ran from
    # its process's start.
    assert waited > limits.max_time_s
    assert second.stop_reason == "answered" and second.duration_s < limits.max_time_s


@pytest.mark.parametrize("ending", ["timeout", "cancel"])
async def test_a_rollout_that_times_out_or_is_cancelled_leaves_no_process(
    scripted_llm: ScriptedLLM, ending: str
) -> None:
    llm = await scripted_llm("unused")
    runner = HarnessRunner(ProbeHarness(), kill_grace_s=0.5, warm=False)
    await runner.endpoint()
    # A harness that never ends and starts a process of its own, and (confined: its PID
    # namespace dies with it) one that left its process group.
    runner.harness = ProbeHarness(
        ProbeOptions(sleep_s=1000, grandchildren=True, escaped=bool(runner.confine))
    )
    limits = AgentLimits(max_turns=2, max_time_s=30.0 if ending == "cancel" else 3.0)
    work = asyncio.ensure_future(runner.run(job(ending), EchoExecutor(), llm, limits))
    tree = await harness_tree(runner, ending, sleeps=2 if runner.confine else 1)
    if ending == "cancel":
        work.cancel()
        with pytest.raises(asyncio.CancelledError):
            await work
    else:
        agent = await work
        assert agent.stop_reason == "time_budget"
        assert agent.harness is not None and agent.harness["exit_status"] == "Killed"
    await runner.aclose()
    assert not runner.processes
    assert not Path(f"/proc/{tree[0]}").exists()  # killed and reaped
    assert not [pid for pid in tree if running(pid)]
