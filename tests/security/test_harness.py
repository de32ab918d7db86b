# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""With a harness as the agent, what the policy writes still runs only in the rollout's sandbox,
and from there neither the answers, nor the rollout's door token, nor the recording endpoint is
reachable.

mini-swe-agent (unchanged) runs one math rollout whose scripted policy uses its bash block for
the probe of `test_no_answers` (the reference answer, the service's API token and the rollout's
own door token looked for in the workspace, /tmp, every visible process and the environment;
the graders imported) and for a request to its own base URL. The harness process itself holds
the token and can reach the endpoint; its commands, run through the sandbox, cannot.
"""

from __future__ import annotations

import base64
import itertools
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.fake_llm import FakeLLM

from nemo_gym_prorl.agent.harness import make_harness
from nemo_gym_prorl.agent.harness.base import SandboxExecutor
from nemo_gym_prorl.agent.loop import AgentLimits
from nemo_gym_prorl.datasets.sources import gym_math_problems, math_rows
from nemo_gym_prorl.llm.access import LLMAccess
from nemo_gym_prorl.llm.dialects.vllm import VLLMCompletionsDialect
from nemo_gym_prorl.llm.pool import LLMBackendPool, PoolConfig
from nemo_gym_prorl.llm.records import SamplingParams
from nemo_gym_prorl.pipeline.job import Job
from nemo_gym_prorl.sandbox import SandboxSpec
from nemo_gym_prorl.tasks.math import MathTask
from nemo_gym_prorl.tasks.workspace import open_workspace
from nemo_gym_prorl.tools.dispatch import ToolBoxConfig

pytestmark = pytest.mark.bwrap

PROBE = (Path(__file__).with_name("probe.py")).read_text()
API_TOKEN = "prorl-api-token-" + os.urandom(8).hex()
CANARY = "canary-planted-" + os.urandom(8).hex()


def block(command: str) -> str:
    return f"THOUGHT: look around.\n\n```mswea_bash_command\n{command}\n```"


def probe_command(needles: list[str]) -> str:
    # The needles go in base64 on stdin: a command line that held them would match itself.
    request = base64.b64encode(
        json.dumps({"needles": needles, "roots": ["/testbed", "/tmp"]}).encode()
    ).decode()
    return f"cat > /tmp/.probe.py <<'PROBE_EOF'\n{PROBE}\nPROBE_EOF\necho {request} | base64 -d | python3 /tmp/.probe.py"


def endpoint_command(url: str) -> str:
    return (
        'python3 -c "import urllib.request, sys\n'
        f"try: urllib.request.urlopen('{url}/models', timeout=5); print('REACHED')\n"
        "except Exception as e: print('UNREACHABLE', type(e).__name__)\""
    )


async def test_the_policys_commands_reach_neither_answers_nor_the_door(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ledger: Any
) -> None:
    problem = next(p for p in gym_math_problems() if len(p["problem"]) > 60)
    row = next(r for r in math_rows(size_per_task=1) if r.get("expected_answer") == problem["answer"])
    answers = [problem["problem"][:60], f'"expected_answer": "{problem["answer"]}"']
    monkeypatch.setenv("PRORL_API_TOKEN", API_TOKEN)  # in the harness's process, as under `prorl serve`
    runner = make_harness({"name": "mini_swe_agent"})

    def policy() -> Callable[[list[int]], str]:
        def door() -> Any:
            (opened,) = runner._endpoint.doors.values()  # type: ignore[union-attr]
            return opened

        calls = itertools.count()

        def reply(prompt: list[int]) -> str:
            call = next(calls)
            if call == 0:  # a canary the probe must find: it is not blind on this path
                plant = f"echo {CANARY[:8]}''{CANARY[8:]} > /tmp/canary.txt && "
                return block(plant + probe_command([*answers, API_TOKEN, door().token, CANARY]))
            if call == 1:
                return block(endpoint_command(door().base_url))
            return block("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT")

        return reply

    backend = await FakeLLM(responder=policy(), max_model_len=65536).start()
    task = MathTask()
    try:
        async with LLMBackendPool(PoolConfig(backends=[backend.url], request_timeout_s=30)) as pool:
            llm = LLMAccess(
                pool=pool,
                dialect=VLLMCompletionsDialect(),
                model="fake",
                default_sampling=SamplingParams(max_tokens=8192),
            )
            workspace = await open_workspace(task, row, SandboxSpec(root_dir=tmp_path), ToolBoxConfig(), [])
            job = Job(id="probe", task="math", instance=row, sampling_params={}, priority=0, active_time_s=300,
                      wall_time_s=None, group_id=None, metadata={})  # fmt: skip
            try:
                agent = await runner.run(
                    job, SandboxExecutor(workspace.sandbox), llm, AgentLimits(max_turns=4)
                )
            finally:
                await workspace.close()
                await runner.aclose()
    finally:
        await backend.kill()
        await task.aclose()

    assert agent.stop_reason == "submitted", agent.steps
    probe, reach = agent.steps[0], agent.steps[1]
    found = json.loads(probe.observation)
    assert [f["path"] for f in found["files"]] == ["/tmp/canary.txt"]  # the probe sees what is there
    found["files"] = [f for f in found["files"] if f["path"] != "/tmp/canary.txt"]
    leaks = {k: found[k] for k in ("imports", "env", "proc", "files", "git") if found[k]}
    ledger.record(
        "harness: answers, API token and door token from the policy's commands",
        not leaks,
        f"{len(answers)} answer fragments + 2 tokens looked for in {found['files_scanned']} files, /proc, env "
        f"through mini-swe-agent's bash block: " + ("nothing found" if not leaks else json.dumps(leaks)),
    )
    assert not leaks, leaks
    assert found["files_scanned"] > 0
    ledger.record(
        "harness: the recording endpoint from the policy's commands",
        "UNREACHABLE" in reach.observation,
        reach.observation.strip()[:120],
    )
    assert "UNREACHABLE" in reach.observation and "REACHED" not in reach.observation.replace(
        "UNREACHABLE", ""
    )
