# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The agent loop: turns, tool calls, observations, and every way a trajectory ends."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from support.scripted_model import ScriptedDialect

from nemo_gym_prorl.agent.loop import AgentLimits, run_agent
from nemo_gym_prorl.llm.balancer import Balancer, BalancerConfig
from nemo_gym_prorl.llm.dialects.base import Dialect, Generation, TurnContext
from nemo_gym_prorl.llm.pool import LLMBackendPool
from nemo_gym_prorl.llm.records import ChatMessage
from nemo_gym_prorl.llm.tito import TokenSession
from nemo_gym_prorl.sandbox import SandboxSpec, open_sandbox
from nemo_gym_prorl.tools.dispatch import ToolBox, ToolBoxConfig, ToolObservation

PROMPT = [ChatMessage(role="system", content="sys"), ChatMessage(role="user", content="task")]


def call(name: str, **arguments: Any) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


class RecordingTools:
    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def specs(self) -> list[dict[str, Any]]:
        return []

    async def call(self, name: str, arguments: str | Mapping[str, Any] | None) -> ToolObservation:
        self.calls.append((name, arguments))
        return ToolObservation(text=f"ran {name}")


def session(pool: LLMBackendPool, dialect: Dialect) -> TokenSession:
    return TokenSession(pool, dialect, model="m", trajectory_id="t-1")


async def test_tool_calls_are_executed_in_order_and_answered_with_tool_messages(
    scripted: Any, pool: LLMBackendPool
) -> None:
    dialect = scripted([call("bash", command="ls") + call("bash", command="pwd"), "The answer is 4."])
    tools = RecordingTools()
    result = await run_agent(session(pool, dialect), tools, PROMPT)
    assert tools.calls == [("bash", {"command": "ls"}), ("bash", {"command": "pwd"})]
    assert [m["role"] for m in dialect.seen[1].new_messages] == ["tool", "tool"]
    assert [m["tool_call_id"] for m in dialect.seen[1].new_messages] == ["call_0_0", "call_0_1"]
    assert result.stop_reason == "answered"
    assert result.final_answer == "The answer is 4."
    assert result.num_turns == 2
    assert [s.observation for s in result.steps] == ["ran bash", "ran bash"]


async def test_submit_ends_the_trajectory_with_the_submitted_answer(
    scripted: Any, pool: LLMBackendPool
) -> None:
    dialect = scripted([call("submit", answer="42"), "never reached"])
    result = await run_agent(session(pool, dialect), RecordingTools(), PROMPT)
    assert result.stop_reason == "submitted"
    assert result.final_answer == "42"
    assert result.num_turns == 1


async def test_malformed_tool_calls_become_error_observations_not_exceptions(
    scripted: Any, pool: LLMBackendPool
) -> None:
    dialect = scripted(["<tool_call>{not json</tool_call>", "done"])
    tools = RecordingTools()
    result = await run_agent(session(pool, dialect), tools, PROMPT)
    assert tools.calls == []
    assert result.steps[0].is_error and "not valid JSON" in result.steps[0].observation
    assert "could not parse" in dialect.seen[1].new_messages[0]["content"]
    assert result.stop_reason == "answered"


async def test_max_turns_ends_a_model_that_never_stops_calling_tools(
    scripted: Any, pool: LLMBackendPool
) -> None:
    dialect = scripted([call("bash", command="true")] * 10)
    result = await run_agent(session(pool, dialect), RecordingTools(), PROMPT, AgentLimits(max_turns=3))
    assert result.stop_reason == "max_turns"
    assert result.num_turns == 3


async def test_generated_token_budget(scripted: Any, pool: LLMBackendPool) -> None:
    reply = call("bash", command="true")
    dialect = scripted([reply] * 10)
    limits = AgentLimits(max_generated_tokens=len(reply) * 2)
    result = await run_agent(session(pool, dialect), RecordingTools(), PROMPT, limits)
    assert result.stop_reason == "token_budget"
    assert result.generated_tokens == len(reply) * 2


async def test_full_context_window_is_a_normal_end(scripted: Any, pool: LLMBackendPool) -> None:
    dialect = scripted([call("bash", command="true")] * 5, exhaust_at=2)
    result = await run_agent(session(pool, dialect), RecordingTools(), PROMPT)
    assert result.stop_reason == "context_length"
    assert result.tokens.context_exhausted


async def test_a_reply_cut_by_max_tokens_is_length_not_answered(scripted: Any, pool: LLMBackendPool) -> None:
    dialect = scripted([call("bash", command="ls"), "The answer is"], truncate_at=1)
    result = await run_agent(session(pool, dialect), RecordingTools(), PROMPT)
    assert result.stop_reason == "length"
    assert result.final_answer == "The answer is"
    assert result.num_turns == 2


async def test_a_tool_call_cut_by_max_tokens_is_length_too(scripted: Any, pool: LLMBackendPool) -> None:
    dialect = scripted(['<tool_call>{"name": "bash", "argu'], truncate_at=0)
    tools = RecordingTools()
    result = await run_agent(session(pool, dialect), tools, PROMPT)
    assert result.stop_reason == "length" and tools.calls == [] and result.num_turns == 1


async def test_complete_calls_in_a_truncated_turn_still_run(scripted: Any, pool: LLMBackendPool) -> None:
    dialect = scripted([call("bash", command="ls") + " and then", "done"], truncate_at=0)
    tools = RecordingTools()
    result = await run_agent(session(pool, dialect), tools, PROMPT)
    assert tools.calls == [("bash", {"command": "ls"})]
    assert result.stop_reason == "answered"


async def test_dead_backends_end_the_trajectory_as_an_infrastructure_failure(
    scripted: Any, dead: Exception, pool: LLMBackendPool
) -> None:
    dialect = scripted([call("bash", command="true"), dead])
    result = await run_agent(session(pool, dialect), RecordingTools(), PROMPT)
    assert result.stop_reason == "infrastructure_error"
    assert result.infrastructure_failed
    assert result.tokens.failure is not None and result.tokens.failure.turn == 1
    assert result.num_turns == 1


async def test_every_turn_prompt_extends_the_previous_tokens(scripted: Any, pool: LLMBackendPool) -> None:
    dialect = scripted([call("bash", command="a"), call("bash", command="b"), "end"])
    result = await run_agent(session(pool, dialect), RecordingTools(), PROMPT)
    turns = result.tokens.turns
    for previous, current in itertools.pairwise(turns):
        assert current.prompt_token_ids[: len(previous.full_token_ids)] == previous.full_token_ids


@pytest.mark.bwrap
async def test_real_tools_in_a_real_sandbox(scripted: Any, pool: LLMBackendPool, tmp_path: Path) -> None:
    dialect = scripted(
        [call("bash", command="echo $((6 * 7)) > out.txt && cat out.txt"), call("submit", answer="42")]
    )
    with open_sandbox(SandboxSpec(root_dir=tmp_path)) as sb:
        async with ToolBox(sb, ToolBoxConfig(tools=["bash", "submit"])) as tools:
            result = await run_agent(session(pool, dialect), tools, PROMPT)
        assert (sb.workspace / "out.txt").read_text() == "42\n"
    assert result.steps[0].observation.strip() == "42"
    assert result.stop_reason == "submitted" and result.final_answer == "42"


class SlotQueuedDialect(ScriptedDialect):
    """Each turn first takes a slot of the model pool's balancer, as the pool does."""

    def __init__(self, replies: list[str | Exception], balancer: Balancer) -> None:
        super().__init__(replies)
        self.balancer = balancer

    async def generate(self, ctx: TurnContext) -> Generation:
        lease = await self.balancer.acquire("t-1")
        try:
            return await super().generate(ctx)
        finally:
            self.balancer.release(lease)


async def test_time_spent_waiting_for_a_model_slot_is_not_charged_to_the_time_budget(
    pool: LLMBackendPool,
) -> None:
    balancer = Balancer(BalancerConfig(max_in_flight=1))
    balancer.add("backend")
    held = await balancer.acquire()
    dialect = SlotQueuedDialect([call("bash", command="true"), "done"], balancer)
    loop = asyncio.get_running_loop()
    loop.call_later(0.4, balancer.release, held)  # four budgets' worth of waiting for the slot
    limits = AgentLimits(max_time_s=0.1)
    result = await run_agent(session(pool, dialect), RecordingTools(), PROMPT, limits)
    assert result.stop_reason == "answered" and result.num_turns == 2
    assert result.model_wait_s > 0.1 and result.duration_s >= result.model_wait_s
