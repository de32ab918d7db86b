# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""With a harness as the agent, what the policy writes still runs only in the rollout's sandbox,
and from there neither the answers, nor the rollout's door token, nor the recording endpoint is
reachable; and the harness's own process holds no key but its rollout's and sees no answer.

mini-swe-agent (unchanged) runs one math rollout and one SWE rollout whose scripted policy uses
its bash block for the probe of `test_no_answers` (the reference answer or the SWE row's gold
patch and hidden tests, the service's API token, the rollout's own door token and another
rollout's, looked for in the workspace, /tmp, every visible process and the environment; the
graders imported) and, for math, a request to its own base URL. The harness's process holds its
token and reaches the endpoint; its commands, run through the sandbox, cannot.

A harness of the tests runs the same probe in the harness's own process on the SWE row (its
files: PRORL_HOME with the SWE cache, the sandboxes, the service's caches, /tmp and its own home;
its environment; every process it sees): confined by bubblewrap, it finds none of them.
"""

from __future__ import annotations

import base64
import contextlib
import importlib.util
import itertools
import json
import os
import sys
import tempfile
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from support.fake_llm import FakeLLM

from nemo_gym_prorl.agent.deps import HandlerDeps
from nemo_gym_prorl.agent.factory import domain_handler
from nemo_gym_prorl.agent.handler import AgentRolloutHandler
from nemo_gym_prorl.agent.harness import make_harness
from nemo_gym_prorl.agent.harness.base import SandboxExecutor
from nemo_gym_prorl.agent.harness.endpoint import Door
from nemo_gym_prorl.agent.harness.process import bubblewrap_works
from nemo_gym_prorl.agent.harness.runner import HarnessRunner
from nemo_gym_prorl.agent.loop import AgentLimits
from nemo_gym_prorl.datasets.sources import gym_math_problems, math_rows
from nemo_gym_prorl.datasets.swe import swe_rows
from nemo_gym_prorl.llm.access import LLMAccess
from nemo_gym_prorl.llm.dialects.vllm import VLLMCompletionsDialect
from nemo_gym_prorl.llm.pool import LLMBackendPool, PoolConfig
from nemo_gym_prorl.llm.recording import RecordingSession
from nemo_gym_prorl.llm.records import SamplingParams
from nemo_gym_prorl.pipeline.job import Job, Trajectory
from nemo_gym_prorl.sandbox import SandboxSpec
from nemo_gym_prorl.sandbox.base import default_sandbox_root
from nemo_gym_prorl.sandbox.runtime import prorl_home
from nemo_gym_prorl.tasks.math import MathTask
from nemo_gym_prorl.tasks.swe import ensure_built
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


@contextlib.asynccontextmanager
async def scripted_llm(responder: Callable[[list[int]], str]) -> AsyncIterator[LLMAccess]:
    """The policy's seat, scripted: a fake backend with room for long probe outputs, behind a pool."""
    backend = await FakeLLM(responder=responder, max_model_len=65536).start()
    try:
        async with LLMBackendPool(PoolConfig(backends=[backend.url], request_timeout_s=30)) as pool:
            yield LLMAccess(
                pool=pool,
                dialect=VLLMCompletionsDialect(),
                model="fake",
                default_sampling=SamplingParams(max_tokens=8192),
            )
    finally:
        await backend.kill()


def no_leaks(
    ledger: Any,
    claim: str,
    found: dict[str, Any],
    searched: str,
    kinds: tuple[str, ...] = ("imports", "env", "proc", "files", "git"),
) -> None:
    """Record the claim in the ledger (it holds when the probe found nothing of `kinds`), then fail
    the test on anything found."""
    leaks = {k: found[k] for k in kinds if found[k]}
    ledger.record(claim, not leaks, f"{searched}: " + ("nothing found" if not leaks else json.dumps(leaks)))
    assert not leaks, leaks


def probe_job(row: dict[str, Any], name: str, task: str) -> Job:
    return Job(id=name, task=task, instance=row, sampling_params={}, priority=0, active_time_s=300,
               wall_time_s=None, group_id=None, metadata={})  # fmt: skip


async def test_the_policys_commands_reach_neither_answers_nor_the_door(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ledger: Any
) -> None:
    problem = next(p for p in gym_math_problems() if len(p["problem"]) > 60)
    row = next(r for r in math_rows(size_per_task=1) if r.get("expected_answer") == problem["answer"])
    answers = [problem["problem"][:60], f'"expected_answer": "{problem["answer"]}"']
    monkeypatch.setenv("PRORL_API_TOKEN", API_TOKEN)  # in the service's process, as under `prorl serve`
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

    task = MathTask()
    try:
        async with scripted_llm(policy()) as llm:
            workspace = await open_workspace(task, row, SandboxSpec(root_dir=tmp_path), ToolBoxConfig(), [])
            try:
                agent = await runner.run(
                    probe_job(row, "probe", "math"),
                    SandboxExecutor(workspace.sandbox),
                    llm,
                    AgentLimits(max_turns=4),
                )
            finally:
                await workspace.close()
                await runner.aclose()
    finally:
        await task.aclose()

    assert agent.stop_reason == "submitted", agent.steps
    probe, reach = agent.steps[0], agent.steps[1]
    found = json.loads(probe.observation)
    assert [f["path"] for f in found["files"]] == ["/tmp/canary.txt"]  # the probe sees what is there
    found["files"] = [f for f in found["files"] if f["path"] != "/tmp/canary.txt"]
    no_leaks(
        ledger,
        "harness: answers, API token and door token from the policy's commands",
        found,
        f"{len(answers)} answer fragments + 2 tokens looked for in {found['files_scanned']} files, /proc, env "
        "through mini-swe-agent's bash block",
    )
    assert found["files_scanned"] > 0
    ledger.record(
        "harness: the recording endpoint from the policy's commands",
        "UNREACHABLE" in reach.observation,
        reach.observation.strip()[:120],
    )
    assert "UNREACHABLE" in reach.observation and "REACHED" not in reach.observation.replace(
        "UNREACHABLE", ""
    )


# -- a SWE row -------------------------------------------------------------------------------------

SUBMIT = block("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT")


def added_lines(patch: str, n: int = 3) -> list[str]:
    """Distinctive lines a patch adds (long enough not to occur by chance)."""
    lines = [ln[1:].strip() for ln in patch.splitlines() if ln.startswith("+") and not ln.startswith("+++")]
    return sorted((ln for ln in lines if len(ln) > 25), key=len, reverse=True)[:n]


async def swe_case() -> tuple[dict[str, Any], list[str]]:
    """A built instance's row as the service gets it, and its gold patch's and hidden tests'
    lines (in the SWE cache under PRORL_HOME, on this host)."""
    instance = next(i for i in await ensure_built() if "toolz" in i["instance_id"])
    needles = added_lines(instance["patch"]) + added_lines(instance["test_patch"])
    assert needles and all(len(n) >= 25 for n in needles)
    return swe_rows([instance], compact=True)[0], needles


def probe_harness_module() -> Any:
    """tests/agent/harness/probe_harness.py, by the name its process imports it by."""
    if "probe_harness" not in sys.modules:
        path = Path(__file__).resolve().parents[1] / "agent" / "harness" / "probe_harness.py"
        spec = importlib.util.spec_from_file_location("probe_harness", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["probe_harness"] = module
        spec.loader.exec_module(module)
    return sys.modules["probe_harness"]


@contextlib.asynccontextmanager
async def swe_rollout(
    responder: Callable[[list[int]], str], runner: HarnessRunner | None = None
) -> AsyncIterator[Callable[[Job], Any]]:
    """`await run(job)`: one SWE rollout through the SWE domain's handler (INIT, RUN by the
    harness, release), mini-swe-agent unless `runner` says otherwise."""
    async with scripted_llm(responder) as llm:
        handler: AgentRolloutHandler = domain_handler(
            HandlerDeps(sandbox=SandboxSpec(), llm=llm),
            domain="swe",
            agent={"max_turns": 4, "max_time_s": 300},
            harness={"name": "mini_swe_agent"},
        )
        if runner is not None:
            handler.harness = runner

        async def run(job: Job) -> Trajectory:
            handler.validate(job.instance)
            state = await handler.init(job)
            try:
                return await handler.run(job, state)
            finally:
                await handler.release(state)

        try:
            yield run
        finally:
            await handler.aclose()


def swe_job(row: dict[str, Any], name: str) -> Job:
    return probe_job(row, name, "swe")


def other_rollout(runner: HarnessRunner) -> Any:
    """Another rollout's door on the runner's endpoint, open for the block."""
    assert runner._endpoint is not None
    return runner._endpoint.opened(RecordingSession(None, sampling=SamplingParams()))  # type: ignore[arg-type]


def rollout_door(runner: HarnessRunner, other: Door) -> Door:
    (door,) = [d for d in runner._endpoint.doors.values() if d is not other]  # type: ignore[union-attr]
    return door


async def test_on_a_swe_row_the_policys_commands_reach_no_gold_patch_hidden_test_or_token(
    monkeypatch: pytest.MonkeyPatch, ledger: Any
) -> None:
    row, needles = await swe_case()
    monkeypatch.setenv("PRORL_API_TOKEN", API_TOKEN)
    runner = make_harness({"name": "mini_swe_agent"})
    await runner.endpoint()
    calls = itertools.count()

    def reply(prompt: list[int]) -> str:
        if next(calls) == 0:
            door = rollout_door(runner, other)
            plant = f"echo {CANARY[:8]}''{CANARY[8:]} > /tmp/canary.txt && "
            return block(plant + probe_command([*needles, API_TOKEN, door.token, other.token, CANARY]))
        return SUBMIT

    with other_rollout(runner) as other:
        async with swe_rollout(reply, runner) as run:
            trajectory = await run(swe_job(row, "swe-probe"))

    assert trajectory.stop_reason == "submitted", trajectory.steps
    found = json.loads(trajectory.steps[0]["observation"])
    assert [f["path"] for f in found["files"]] == ["/tmp/canary.txt"]  # the probe sees what is there
    found["files"] = []
    no_leaks(
        ledger,
        "harness: SWE gold patch, hidden tests and tokens from the policy's commands",
        found,
        f"{len(needles)} patch and test lines + 3 tokens looked for in {found['files_scanned']} files, git, "
        "/proc, env through mini-swe-agent's bash block",
    )
    assert found["files_scanned"] > 0


async def test_the_harness_process_sees_no_gold_patch_no_service_file_and_no_other_token(
    monkeypatch: pytest.MonkeyPatch, ledger: Any
) -> None:
    if not bubblewrap_works():
        pytest.skip("bubblewrap does not work here: the harness's process is not confined")
    row, needles = await swe_case()
    monkeypatch.setenv("PRORL_API_TOKEN", API_TOKEN)
    probes = probe_harness_module()
    home = Path.home()
    # Where the answers and keys live on this host: the harness's process must not see them.
    roots = [
        prorl_home(),
        default_sandbox_root(),
        Path(tempfile.gettempdir()),
        home / ".cache",
        home / ".config",
    ]
    assert any((prorl_home() / "swe").rglob("*")), "the SWE cache holds the gold patch on this host"
    runner = HarnessRunner(probes.ProbeHarness())
    await runner.endpoint()
    assert runner.confine
    with other_rollout(runner) as other:
        runner.harness = probes.ProbeHarness(
            probes.ProbeOptions(
                probe=PROBE,
                probe_request={
                    "needles": [*needles, API_TOKEN, other.token, CANARY],
                    "roots": [str(r) for r in roots],
                },
                canary=CANARY,
            )
        )
        async with swe_rollout(lambda prompt: SUBMIT, runner) as run:
            trajectory = await run(swe_job(row, "swe-harness-probe"))

    found = json.loads(trajectory.final_answer or "{}")["probe"]
    # It sees what is there: the canary it wrote in its own home.
    assert {Path(f["path"]).name for f in found["files"]} == {"canary.txt"}, found["files"]
    found["files"] = []
    # The project's packages are importable there by design (the harness is the project's code).
    no_leaks(
        ledger,
        "harness: SWE gold patch, hidden tests and tokens from the harness's own process",
        found,
        f"{len(needles)} patch and test lines + 2 tokens looked for in {found['files_scanned']} files under "
        "PRORL_HOME, the sandboxes, the caches, /tmp, and in /proc and env of the harness's process",
        kinds=("env", "proc", "files", "git"),
    )
