# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""`/run` results with no generated turn are still ones NeMo RL can consume (`integrations.nemo_rl.result`).

NeMo RL's consumption rules, from `nemo_rl/environments/nemo_gym.py` (7ea279a): at least one
output item with non-empty `generation_token_ids` (else "no generation data", masked or not);
each trainable item's prompt starts with everything seen before; the mask is read from
`instance_config.mask_sample`; HTTP 200 (the synchronous path aborts on anything else).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from support.gym_fakes import FakeResources, ScriptedDialect, scripted_runtime
from support.scripted_model import TurnContext

from nemo_gym_prorl.agent.loop import AgentLimits
from nemo_gym_prorl.integrations.gym.config import ProRLAgentSettings
from nemo_gym_prorl.integrations.gym.contract import check_result, trainable_turns
from nemo_gym_prorl.integrations.gym.runtime import ProRLGymRuntime
from nemo_gym_prorl.integrations.nemo_rl.result import ensure_trainable, has_trainable_item
from nemo_gym_prorl.pipeline import PipelineConfig

ROW = {
    "responses_create_params": {"input": [{"role": "user", "content": "What is 1+1?"}],
                                "temperature": 1.0, "top_p": 1.0, "max_output_tokens": 64},
    "agent_ref": {"type": "responses_api_agents", "name": "prorl_agent"},
    "data_source": "prorl_math", "task_id": "t1", "expected_answer": "2",
}  # fmt: skip


class SlowDialect(ScriptedDialect):
    async def generate(self, ctx: TurnContext):  # type: ignore[no-untyped-def]
        await asyncio.sleep(5)
        return await super().generate(ctx)


@pytest.fixture
async def runtime_with() -> AsyncIterator:
    made: list[ProRLGymRuntime] = []

    async def make(dialect: ScriptedDialect, limits: AgentLimits | None = None) -> ProRLGymRuntime:
        settings = ProRLAgentSettings(
            pipeline=PipelineConfig(init_workers=2, run_workers=2, eval_workers=2),
            agent=limits or AgentLimits(max_turns=4),
        )
        runtime = scripted_runtime(settings, dialect, lambda: FakeResources(reward=0.0))
        made.append(runtime)
        return runtime

    yield make
    for runtime in made:
        await runtime.close()


def assert_nemo_rl_consumes_masked(outcome) -> None:  # type: ignore[no-untyped-def]
    assert outcome.status == 200, outcome.body
    body = outcome.body
    assert check_result(body) == []
    assert len(trainable_turns(body)) == 1
    assert body["instance_config"]["mask_sample"] is True
    assert body["failure_kind"] == "prorl:no_generation"
    assert body["reward"] == 0.0 and sum(body["reward_components"].values()) == 0.0


async def test_context_overflow_on_the_first_turn_is_a_masked_consumable_result(runtime_with) -> None:
    runtime = await runtime_with(ScriptedDialect(["unused"], exhaust_at=0))
    outcome = await runtime.run(dict(ROW))
    assert_nemo_rl_consumes_masked(outcome)
    assert "context_length" in outcome.body["failure_reason"]


async def test_time_budget_spent_before_the_first_turn_is_a_masked_consumable_result(runtime_with) -> None:
    runtime = await runtime_with(SlowDialect(["unused"]), AgentLimits(max_turns=4, max_time_s=0.05))
    outcome = await runtime.run(dict(ROW))
    assert_nemo_rl_consumes_masked(outcome)
    assert "time_budget" in outcome.body["failure_reason"]


async def test_a_rollout_with_turns_is_left_as_it_is(runtime_with) -> None:
    runtime = await runtime_with(ScriptedDialect(["So the answer is \\boxed{2}."]))
    body = (await runtime.run(dict(ROW))).body
    assert check_result(body) == []
    assert (
        body.get("failure_kind") != "prorl:no_generation" and body["instance_config"]["mask_sample"] is False
    )
    assert not any(item["id"].endswith("_placeholder") for item in body["response"]["output"])


def test_the_checker_rejects_an_empty_output_even_when_masked() -> None:
    body = {"responses_create_params": {}, "response": {"output": []}, "reward": 0.0,
            "instance_config": {"mask_sample": True}}  # fmt: skip
    assert any("no generation data" in p for p in check_result(body))
    fixed = ensure_trainable(body, trajectory_id="x", reason="context_length")
    assert has_trainable_item(fixed["response"]["output"]) and check_result(fixed) == []
