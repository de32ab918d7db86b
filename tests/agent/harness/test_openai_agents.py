# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The OpenAI Agents SDK, unchanged, as a rollout's agent: structured tool calls through the
recording endpoint (the model's own tool-call format, parsed and rendered back), its `bash`
function in the rollout's sandbox, one token sequence."""

from __future__ import annotations

import json

from harness_helpers import ScriptedLLM, harness_job, prompt_row
from support.fake_llm import detokenize

from nemo_gym_prorl.agent.harness import make_harness
from nemo_gym_prorl.agent.harness.base import SandboxExecutor
from nemo_gym_prorl.agent.harness.openai_agents import DEFAULT_INSTRUCTIONS
from nemo_gym_prorl.agent.loop import AgentLimits
from nemo_gym_prorl.sandbox import SandboxSpec
from nemo_gym_prorl.sandbox.factory import open_sandbox

CALL = (
    "<tool_call>\n"
    + json.dumps({"name": "bash", "arguments": {"command": "python3 -c 'print(6 * 7)'"}})
    + "\n</tool_call>"
)
ANSWER = "The product is \\boxed{42}."


async def test_structured_tool_calls_round_trip_into_one_token_sequence(scripted_llm: ScriptedLLM) -> None:
    llm = await scripted_llm(CALL, ANSWER)
    runner = make_harness({"name": "openai_agents"})
    with open_sandbox(SandboxSpec()) as sandbox:
        agent = await runner.run(
            harness_job(prompt_row("What is 6 times 7?"), "sdk-1"),
            SandboxExecutor(sandbox),
            llm,
            AgentLimits(max_turns=4),
        )
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
    # `tool_prompt: system` (the default): the model saw the SDK's function in its system
    # message, after the SDK's instructions, once (the chat template got no tools).
    prompt = detokenize(first.prompt_token_ids)
    assert f"{DEFAULT_INSTRUCTIONS}\n\nYou can use tools." in prompt
    assert prompt.count('"name": "bash"') == 1 and "Tools:" not in prompt
