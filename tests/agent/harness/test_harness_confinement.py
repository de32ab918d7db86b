# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""A harness's process is confined like a sandbox and reaches its own door and nothing else.

The probe of tests/security/test_privileges.py (`support.privilege_probe`) runs inside the
harness's own process, one-shot and forked from the warm server: never uid 0, every capability
set empty, `Seccomp: 2`, no setuid file on the host, no service path in pid 1's command line or
environment, and the host's loopback (where the model server listens) out of reach, while its
door answers (the rollout completes through it). Two rollouts forked from one server at once
each see their own home alone: not the other's home, request or answer.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from harness_helpers import ScriptedLLM, harness_job, prompt_row
from probe_harness import ProbeHarness, ProbeOptions
from support.privilege_probe import PROBE, verdict
from test_harness_process import EchoExecutor

from nemo_gym_prorl.agent.harness.process import bubblewrap_works
from nemo_gym_prorl.agent.harness.runner import HarnessRunner
from nemo_gym_prorl.agent.loop import AgentLimits, AgentTrajectory
from nemo_gym_prorl.sandbox.base import default_sandbox_root
from nemo_gym_prorl.sandbox.runtime import prorl_home

pytestmark = [
    pytest.mark.bwrap,
    pytest.mark.skipif(not bubblewrap_works(), reason="bubblewrap cannot make namespaces here"),
]


@pytest.fixture(scope="module")
def model_port() -> Iterator[int]:
    """A listener on the host's loopback, as the embedded model server is."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        yield listener.getsockname()[1]


def report(agent: AgentTrajectory) -> dict[str, Any]:
    assert agent.stop_reason == "answered" and agent.final_answer is not None, agent
    return json.loads(agent.final_answer)


def check(found: dict[str, Any], port: int) -> None:
    probe = found["probe"]
    # Its home (and what it made there) is gone with the rollout: the probe's own view, which
    # no user namespace remaps for a harness (its uid inside is its uid on the host).
    verdict(probe, host_dir=None, hidden=[str(prorl_home()), str(default_sandbox_root())])
    assert probe["reach"][str(port)] != "connected", "the host's loopback is reachable from the harness"


@pytest.mark.parametrize("warm", [False, True], ids=["own-process", "forked"])
async def test_a_harness_process_is_unprivileged_filtered_and_cut_off_but_for_its_door(
    scripted_llm: ScriptedLLM, model_port: int, warm: bool
) -> None:
    llm = await scripted_llm("unused")
    options = ProbeOptions(
        command="echo through-the-door", probe=PROBE, probe_request={"ports": [model_port]}
    )
    runner = HarnessRunner(ProbeHarness(options), warm=warm)
    try:
        found = report(await runner.run(harness_job(prompt_row("Probe."), "p"), EchoExecutor(), llm,
                                        AgentLimits(max_turns=2)))  # fmt: skip
    finally:
        await runner.aclose()
    assert "through-the-door" in found["command"]  # its door's commands route answered
    check(found, model_port)


async def test_forked_rollouts_each_see_their_own_home_alone(scripted_llm: ScriptedLLM) -> None:
    llm = await scripted_llm("unused")
    # Each writes a canary in its home, then (both running) looks for the other's.
    options = ProbeOptions(probe=PROBE, probe_request={"pause_s": 1.5}, canary="mine", sleep_s=0.5)
    runner = HarnessRunner(ProbeHarness(options))
    limits = AgentLimits(max_turns=2)
    try:
        first, second = await asyncio.gather(
            runner.run(harness_job(prompt_row("One."), "one"), EchoExecutor(), llm, limits),
            runner.run(harness_job(prompt_row("Two."), "two"), EchoExecutor(), llm, limits),
        )
    finally:
        await runner.aclose()
    one, two = report(first), report(second)
    assert one["started"] < two["ended"] and two["started"] < one["ended"], "the two ran at once"
    for own in (one, two):
        home = Path(own["env"]["HOME"])
        assert own["probe"]["home_siblings"] == [home.name], own["probe"]["home_siblings"]
