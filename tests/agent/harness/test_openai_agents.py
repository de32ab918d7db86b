# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The OpenAI Agents SDK, unchanged, as a rollout's agent: structured tool calls through the
recording endpoint (the model's own tool-call format, parsed and rendered back), its `bash`
function in the rollout's sandbox, one token sequence."""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterator

import pytest
from support.fake_llm import FakeLLM

from nemo_gym_prorl.agent.harness import make_harness
from nemo_gym_prorl.agent.harness.base import SandboxExecutor
from nemo_gym_prorl.agent.loop import AgentLimits
from nemo_gym_prorl.llm.access import LLMAccess
from nemo_gym_prorl.llm.dialects.vllm import VLLMCompletionsDialect
from nemo_gym_prorl.llm.pool import LLMBackendPool, PoolConfig
from nemo_gym_prorl.llm.records import SamplingParams
from nemo_gym_prorl.pipeline.job import Job
from nemo_gym_prorl.sandbox import SandboxSpec
from nemo_gym_prorl.sandbox.factory import open_sandbox

CALL = (
    "<tool_call>\n"
    + json.dumps({"name": "bash", "arguments": {"command": "python3 -c 'print(6 * 7)'"}})
    + "\n</tool_call>"
)
ANSWER = "The product is \\boxed{42}."


@pytest.fixture
async def llm() -> AsyncIterator[LLMAccess]:
    script = itertools.chain([CALL], itertools.repeat(ANSWER))
    backend = await FakeLLM(responder=lambda prompt: next(script), max_model_len=32768).start()
    async with LLMBackendPool(PoolConfig(backends=[backend.url], request_timeout_s=10)) as pool:
        yield LLMAccess(
            pool=pool,
            dialect=VLLMCompletionsDialect(),
            model="fake",
            default_sampling=SamplingParams(max_tokens=256),
        )
    await backend.kill()


def job() -> Job:
    instance = {"responses_create_params": {"input": [{"role": "user", "content": "What is 6 times 7?"}]}}
    return Job(
        id="sdk-1",
        task="math",
        instance=instance,
        sampling_params={},
        priority=0,
        active_time_s=60,
        wall_time_s=None,
        group_id=None,
        metadata={},
    )


async def test_structured_tool_calls_round_trip_into_one_token_sequence(llm: LLMAccess) -> None:
    runner = make_harness({"name": "openai_agents"})
    with open_sandbox(SandboxSpec()) as sandbox:
        agent = await runner.run(job(), SandboxExecutor(sandbox), llm, AgentLimits(max_turns=4))
    await runner.aclose()
    assert agent.stop_reason == "answered" and agent.final_answer == ANSWER
    assert [s.arguments for s in agent.steps] == [{"command": "python3 -c 'print(6 * 7)'"}]
    assert "42" in agent.steps[0].observation
    # The SDK sent its tool call back as `tool_calls` and the result as a `tool` message: the
    # second call extended the first's exact ids.
    assert agent.harness is not None and agent.harness["merged_share"] == 1.0
    assert [m["role"] for m in agent.messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert agent.messages[2]["tool_calls"][0]["function"]["name"] == "bash"
    first, second = agent.tokens.turns
    assert second.prompt_token_ids[: len(first.full_token_ids)] == first.full_token_ids
    assert agent.reply_positions == [2, 4]
