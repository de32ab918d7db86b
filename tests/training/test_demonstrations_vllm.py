# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""A demonstration's ids are the ones a rollout records: the service's agent loop and
`TokenSession` on the real embedded vLLM, given the demonstration's generations in the model's
seat, record the same prompt and completion ids, the same tool messages and the same answer."""

from __future__ import annotations

from typing import Any

import pytest

from nemo_gym_prorl.agent.loop import FINISH_TOOL, run_agent
from nemo_gym_prorl.agent.prompts import initial_messages
from nemo_gym_prorl.llm.access import LLMConfig
from nemo_gym_prorl.llm.dialects import Generation, TurnContext, VLLMCompletionsDialect
from nemo_gym_prorl.llm.embedded import VLLMServer
from nemo_gym_prorl.llm.pool import LLMBackendPool, PoolConfig
from nemo_gym_prorl.llm.tito import TokenSession
from nemo_gym_prorl.sandbox import SandboxSpec
from nemo_gym_prorl.tasks.math import MathTask
from nemo_gym_prorl.tasks.workspace import open_workspace
from nemo_gym_prorl.tools.dispatch import ToolBoxConfig
from nemo_gym_prorl.training.demonstrations import (
    DemonstrationConfig,
    collect_demonstrations,
    demonstrate_rows,
)
from nemo_gym_prorl.training.heldout import SeedSplit

pytestmark = [pytest.mark.vllm, pytest.mark.bwrap, pytest.mark.timeout(900)]


class GivenGenerations(VLLMCompletionsDialect):
    """Test double: the service's `vllm` dialect building every prompt on the real server, with
    the sampling replaced by given generation ids (their text from the server's /detokenize)."""

    def __init__(self, generations: list[list[int]]) -> None:
        super().__init__()
        self.generations = list(generations)

    async def generate(self, ctx: TurnContext) -> Generation:
        prompt, max_model_len = await self.next_prompt(ctx)
        ids = self.generations.pop(0)
        # vLLM leaves the end-of-turn token out of a completion's text.
        reply, _ = await ctx.pool.post_json(
            "/detokenize", {"model": ctx.model, "tokens": ids[:-1]}, route=ctx.route, parse=dict
        )
        return Generation(
            prompt_token_ids=prompt,
            generation_token_ids=ids,
            generation_log_probs=[0.0] * len(ids),
            finish_reason="stop",
            text=reply["prompt"],
            max_model_len=max_model_len,
        )


def generations(completion_ids: list[int], env_mask: list[int]) -> list[list[int]]:
    runs: list[list[int]] = []
    previous = 0
    for token, mask in zip(completion_ids, env_mask, strict=True):
        if mask:
            if not previous:
                runs.append([])
            runs[-1].append(token)
        previous = mask
    return runs


async def test_two_demonstrations_match_what_the_service_records_for_them(real_vllm: VLLMServer) -> None:
    config = DemonstrationConfig(
        llm=LLMConfig(backends=[real_vllm.base_url], api_key=real_vllm.api_key), concurrency=1
    )
    demos, summary = await collect_demonstrations(2, config)
    assert summary.kept == 2
    rows = SeedSplit().train_rows(2)

    async with LLMBackendPool(PoolConfig(backends=[real_vllm.base_url], api_key=real_vllm.api_key)) as pool:
        for demo, row in zip(demos, rows, strict=True):
            given = generations(demo.completion_ids, demo.env_mask)
            session = TokenSession(pool, GivenGenerations(given), model=demo.model)
            workspace = await open_workspace(
                MathTask(),
                row,
                SandboxSpec(),
                ToolBoxConfig(ipython_timeout_s=30.0),
                ["ipython", FINISH_TOOL],
            )
            try:
                first = initial_messages(row, workspace.tools.specs())
                agent = await run_agent(session, workspace.tools, first)
            finally:
                session.close()
                await workspace.close()

            # The ids a rollout records: the first prompt, then everything after it.
            assert agent.tokens.turns[0].prompt_token_ids == demo.prompt_ids
            assert session.token_ids == [*demo.prompt_ids, *demo.completion_ids]
            # The same conversation: the parsed call, the real observation, the answer that ends it.
            assert agent.stop_reason == "answered"
            assert [s.observation for s in agent.steps] == [
                m["content"] for m in demo.messages if m["role"] == "tool"
            ]
            assert agent.final_answer == demo.messages[-1]["content"]
            assert [_without_tokens(m) for m in agent.messages] == [
                {k: v for k, v in m.items() if k != "tool_calls"} for m in demo.messages
            ]

            # The assistant's ids are the chat template's own tokens for its message.
            messages = [{"role": m["role"], "content": m["content"]} for m in demo.messages[:3]]
            rendered, _ = await pool.post_json(
                "/tokenize",
                {"model": demo.model, "messages": messages, "add_generation_prompt": False,
                 "add_special_tokens": False},
                parse=dict,
            )  # fmt: skip
            assert rendered["tokens"][: len(demo.prompt_ids) + len(given[0])] == [*demo.prompt_ids, *given[0]]


async def test_given_rows_are_demonstrated_by_task_id_and_a_held_out_row_is_refused(
    real_vllm: VLLMServer,
) -> None:
    config = DemonstrationConfig(
        llm=LLMConfig(backends=[real_vllm.base_url], api_key=real_vllm.api_key), concurrency=2
    )
    split = SeedSplit()
    rows = split.train_rows(3, start=5)
    guides, dropped = await demonstrate_rows(rows, config)
    assert guides and set(guides) <= {row["task_id"] for row in rows}
    assert sum(dropped.values()) + len(guides) == len(rows)  # each row kept or dropped with a reason
    for row in rows:
        if row["task_id"] in guides:
            guide = guides[row["task_id"]]
            assert guide.reward == 1.0 and guide.recipe.seed == row["reasoning_gym"]["seed"]
            assert guide.messages[1]["content"] == row["responses_create_params"]["input"][-1]["content"]
    with pytest.raises(ValueError, match="held-out task"):
        await demonstrate_rows(split.heldout_rows()[:1], config)


def _without_tokens(message: dict[str, Any]) -> dict[str, Any]:
    return {
        k: v
        for k, v in message.items()
        if k not in ("prompt_token_ids", "generation_token_ids", "generation_log_probs")
    }
