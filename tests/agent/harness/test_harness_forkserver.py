# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The harness's warm fork server (the default): every rollout is a process of its own, forked
from one that made the harness's imports once; it gets its request (its door token) in a file
of its own home that it removes, so the server never holds a token; a rollout killed at its
deadline leaves the server serving the next; closing the runner leaves nothing running."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from harness_helpers import ScriptedLLM, harness_job, prompt_row
from probe_harness import ProbeHarness, ProbeOptions
from test_harness_process import EchoExecutor, descendants, running

from nemo_gym_prorl.agent.harness.runner import HarnessRunner
from nemo_gym_prorl.agent.loop import AgentLimits, AgentTrajectory
from nemo_gym_prorl.pipeline.job import Job


def job(name: str) -> Job:
    return harness_job(prompt_row("Report."), name)


def report(agent: AgentTrajectory) -> dict[str, Any]:
    assert agent.final_answer is not None, agent
    return json.loads(agent.final_answer)


async def test_rollouts_are_forked_processes_of_their_own_from_one_warm_server(
    scripted_llm: ScriptedLLM,
) -> None:
    llm = await scripted_llm("unused")
    runner = HarnessRunner(ProbeHarness(ProbeOptions(command="ls ~", sleep_s=0.5)))
    limits = AgentLimits(max_turns=2)
    first, second = await asyncio.gather(
        runner.run(job("one"), EchoExecutor(), llm, limits),
        runner.run(job("two"), EchoExecutor(), llm, limits),
    )
    server = runner._server
    assert server is not None and server.pid is not None
    tree = descendants(server.pid)
    await runner.aclose()

    one, two = report(first), report(second)
    assert one["pid"] != two["pid"] and one["env"]["HOME"] != two["env"]["HOME"]  # a process and home each
    assert {Path(one["env"]["HOME"]).parent, Path(two["env"]["HOME"]).parent} == {server.home}
    assert first.stop_reason == second.stop_reason == "answered"
    assert not [pid for pid in tree if running(pid)]  # closed: every process of the tree is gone


async def test_a_rollout_killed_at_its_deadline_leaves_the_server_serving_the_next(
    scripted_llm: ScriptedLLM,
) -> None:
    llm = await scripted_llm("unused")
    runner = HarnessRunner(ProbeHarness(ProbeOptions(sleep_s=1000)), kill_grace_s=0.5)
    await runner.endpoint()
    server = await runner.server()
    assert server is not None and server.pid is not None
    idle = {pid for pid in descendants(server.pid) if running(pid)}  # the server (in bubblewrap)
    stuck = await runner.run(job("stuck"), EchoExecutor(), llm, AgentLimits(max_turns=2, max_time_s=2.0))
    assert stuck.stop_reason == "time_budget"
    assert stuck.harness is not None and stuck.harness["exit_status"] == "Killed"
    # The killed rollout's process is gone; the server is as it was, and serves the next.
    assert {pid for pid in descendants(server.pid) if running(pid)} == idle
    again = await runner.run(job("again"), EchoExecutor(), llm, AgentLimits(max_turns=2, max_time_s=2.0))
    assert again.stop_reason == "time_budget" and running(server.pid)
    await runner.aclose()
    assert not [pid for pid in idle if running(pid)]
