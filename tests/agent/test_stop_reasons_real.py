# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Stop reasons on the real model (vLLM-CPU, SmolLM2-135M): a reply cut by max_tokens is
`length` and not a proper end; a reply the model finishes itself is `answered`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from nemo_gym_prorl.agent.handler import to_trajectory
from nemo_gym_prorl.agent.loop import run_agent
from nemo_gym_prorl.llm.dialects import VLLMCompletionsDialect
from nemo_gym_prorl.llm.embedded import VLLMServer
from nemo_gym_prorl.llm.pool import LLMBackendPool, PoolConfig
from nemo_gym_prorl.llm.records import ChatMessage, SamplingParams
from nemo_gym_prorl.llm.tito import TokenSession
from nemo_gym_prorl.tools.dispatch import ToolObservation

pytestmark = pytest.mark.vllm

PROMPT = [
    ChatMessage(role="system", content="You are a helpful assistant."),
    ChatMessage(role="user", content="Write a long story about a dragon who learns to code."),
]


class NoTools:
    def specs(self) -> list[dict[str, Any]]:
        return []

    async def call(self, name: str, arguments: str | Mapping[str, Any] | None) -> ToolObservation:
        return ToolObservation(text="no tools here", is_error=True)


async def run(server: VLLMServer, max_tokens: int, user: str | None = None) -> Any:
    prompt = PROMPT if user is None else [PROMPT[0], ChatMessage(role="user", content=user)]
    async with LLMBackendPool(PoolConfig(backends=[server.base_url], api_key=server.api_key)) as pool:
        session = TokenSession(
            pool,
            VLLMCompletionsDialect(),
            model=server.spec.served_model_name,
            sampling=SamplingParams(temperature=0.0, max_tokens=max_tokens),
        )
        try:
            return await run_agent(session, NoTools(), prompt)
        finally:
            session.close()


async def test_a_reply_cut_by_a_tiny_max_tokens_is_length_and_not_a_proper_end(real_vllm: VLLMServer) -> None:
    agent = await run(real_vllm, max_tokens=3)
    assert agent.tokens.turns[-1].finish_reason == "length"
    assert len(agent.tokens.turns[-1].generation_token_ids) == 3
    assert agent.stop_reason == "length"
    trajectory = to_trajectory(agent, [], {})
    assert trajectory.end_properly is False and trajectory.stop_reason == "length"


async def test_a_reply_the_model_ends_itself_is_answered(real_vllm: VLLMServer) -> None:
    agent = await run(real_vllm, max_tokens=64, user="Reply with the single word: yes")
    assert agent.tokens.turns[-1].finish_reason == "stop"
    assert agent.stop_reason == "answered" and agent.final_answer
    assert to_trajectory(agent, [], {}).end_properly is True
