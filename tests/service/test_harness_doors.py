# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""A harness task through the service's doors: `/process` (ProRL's) and `/v1/rollouts`, named by
task or by `data_source`, with the same result shapes as the built-in agent's (a scripted backend
stands in for the policy; the sandbox and mini-swe-agent are real)."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from support.fake_llm import FakeLLM

from nemo_gym_prorl.agent.deps import HandlerDeps
from nemo_gym_prorl.agent.factory import domain_handler
from nemo_gym_prorl.llm.access import LLMAccess, LLMConfig
from nemo_gym_prorl.pipeline import HandlerRegistry
from nemo_gym_prorl.sandbox import SandboxSpec
from nemo_gym_prorl.service.config import validate_config
from nemo_gym_prorl.service.stack import RolloutStack, StackConfig, build_stack, stack_from_config

TOKEN = "harness-doors-token"
SUBMIT = "THOUGHT: done.\n\n```mswea_bash_command\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && echo '\\boxed{42}'\n```"
FIRST = "THOUGHT: compute.\n\n```mswea_bash_command\npython3 -c 'print(6 * 7)'\n```"


def handlers(llm: LLMAccess, backends: object) -> HandlerRegistry:
    registry = HandlerRegistry()
    registry.register(
        "math_mini_swe_agent",
        domain_handler(
            HandlerDeps(sandbox=SandboxSpec(), llm=llm),
            domain="math",
            agent={"max_turns": 4},
            harness={"name": "mini_swe_agent"},
        ),
    )
    return registry


def instance() -> dict[str, Any]:
    return {
        "data_source": "math_mini_swe_agent",
        "responses_create_params": {"input": [{"role": "user", "content": "What is 6 times 7?"}]},
        "expected_answer": "42",
    }


@pytest.fixture
async def stack() -> AsyncIterator[RolloutStack]:
    # Each rollout: one command, then the submission (a rollout's calls reach the backend in order).
    replies = itertools.cycle([FIRST, SUBMIT])
    backend = await FakeLLM(responder=lambda prompt: next(replies), max_model_len=32768).start()
    config = StackConfig(llm=LLMConfig(backends=[backend.url], model="fake", sampling={"max_tokens": 256}))
    built = build_stack(config, handlers)
    await built.start()
    yield built
    await built.close()
    await backend.kill()


@pytest.fixture
async def http(stack: RolloutStack) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=stack.app(token=TOKEN)),
        base_url="http://test",
        headers={"Authorization": f"Bearer {TOKEN}"},
        timeout=120,
    ) as client:
        yield client


async def test_process_runs_a_harness_rollout_named_by_data_source(http: httpx.AsyncClient) -> None:
    response = await http.post(
        "/process", json={"instance": instance(), "sampling_params": {"temperature": 1.0}}
    )
    assert response.status_code == 200, response.text
    result = response.json()
    assert result["success"] and result["reward"] == 1.0 and not result["filter"]
    replies = [m for m in result["messages"] if m["role"] == "assistant"]
    assert len(replies) == 2 and all(m["token_ids"] and m["logprobs"] for m in replies)


async def test_v1_rollouts_returns_the_harness_record_beside_the_trajectory(http: httpx.AsyncClient) -> None:
    submitted = await http.post(
        "/v1/rollouts", json={"jobs": [{"task": "math_mini_swe_agent", "instance": instance()}]}
    )
    assert submitted.status_code == 202, submitted.text
    (job_id,) = submitted.json()["ids"]
    result = (await http.get(f"/v1/rollouts/{job_id}", params={"wait_s": 60})).json()
    assert result["state"] == "done" and result["reward"] == 1.0
    harness = result["trajectory"]["harness"]
    assert harness["name"] == "mini_swe_agent" and harness["exit_status"] == "Submitted"
    assert harness["merged_share"] == 1.0 and harness["segments"] == 1


async def test_a_harness_rollout_runs_in_a_worker_process_as_prorl_serve_runs_it() -> None:
    # `prorl serve`'s default executor: the harness, its recording endpoint and its sandbox live
    # in a worker process, which builds the task from the configuration as the service would.
    replies = itertools.cycle([FIRST, SUBMIT])
    backend = await FakeLLM(responder=lambda prompt: next(replies), max_model_len=32768).start()
    config = validate_config({
        "tasks": {"math_mini_swe_agent": {
            "handler": "nemo_gym_prorl.agent.factory:domain_handler",
            "options": {"domain": "math", "agent": {"max_turns": 4}, "harness": {"name": "mini_swe_agent"}},
        }},
        "llm": {"backends": [backend.url], "model": "fake", "sampling": {"max_tokens": 256}},
        "executor": {"kind": "processes", "processes": {"workers": 1}},
        "journal": {"path": None},
    })  # fmt: skip
    stack = stack_from_config(config)
    try:
        await stack.start()
        workers = stack.pipeline.executor.nodes()
        assert len(workers) == 1, workers
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=stack.app(token=TOKEN)), base_url="http://test",
            headers={"Authorization": f"Bearer {TOKEN}"}, timeout=120,
        ) as http:  # fmt: skip
            submitted = await http.post(
                "/v1/rollouts", json={"jobs": [{"task": "math_mini_swe_agent", "instance": instance()}]}
            )
            assert submitted.status_code == 202, submitted.text
            (job_id,) = submitted.json()["ids"]
            result = (await http.get(f"/v1/rollouts/{job_id}", params={"wait_s": 90})).json()
        assert result["state"] == "done" and result["reward"] == 1.0, result
        harness = result["trajectory"]["harness"]
        assert harness["name"] == "mini_swe_agent" and harness["exit_status"] == "Submitted"
        assert harness["merged_share"] == 1.0 and harness["segments"] == 1
    finally:
        await stack.close()
        await backend.kill()
