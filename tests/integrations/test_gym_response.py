# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Trajectory -> Gym output items, and the NeMo RL contract checker on good and bad results."""

from __future__ import annotations

import math

from nemo_gym_prorl.integrations.gym.contract import check_group, check_result
from nemo_gym_prorl.integrations.gym.response import chat_tool_specs, output_items
from nemo_gym_prorl.llm.records import ToolCall, TurnRecord


def turn(i: int, prompt: list[int], ids: list[int], calls: int = 0) -> TurnRecord:
    return TurnRecord(
        turn=i, prompt_token_ids=prompt, generation_token_ids=ids, generation_log_probs=[-0.1] * len(ids),
        finish_reason="stop", text="hi", content="hi" if not calls else "",
        tool_calls=[ToolCall(id=f"c{i}{k}", name="bash", arguments={"cmd": "ls"}) for k in range(calls)], dialect="x",
    )  # fmt: skip


def result(items: list[dict], reward: float = 1.0, **extra: object) -> dict:
    return {
        "responses_create_params": {"input": []},
        "response": {"output": items},
        "reward": reward,
        **extra,
    }


def test_token_fields_sit_on_the_last_generated_item_of_a_turn() -> None:
    items = output_items([turn(0, [1, 2], [3, 4], calls=2), turn(1, [1, 2, 3, 4, 5], [6])], [], "t")
    assert [i["type"] for i in items] == ["function_call", "function_call", "message"]
    assert items[0]["generation_token_ids"] == [] and items[1]["generation_token_ids"] == [3, 4]
    assert check_result(result(items)) == []


def test_checker_catches_each_violation() -> None:
    good = output_items([turn(0, [1], [2]), turn(1, [1, 2, 9], [3])], [], "t")
    assert check_result(result(good)) == []
    broken = output_items([turn(0, [1], [2]), turn(1, [1, 9], [3])], [], "t")
    assert any("Non-contiguous" in p for p in check_result(result(broken)))
    nan = [dict(good[0], generation_log_probs=[math.nan])]
    assert any("NaN" in p for p in check_result(result(nan)))
    missing = [{k: v for k, v in good[0].items() if k != "generation_log_probs"}]
    assert any("token fields" in p for p in check_result(result(missing)))
    assert any("sum to" in p for p in check_result(result(good, reward=1.0, reward_components={"a": 0.5})))
    assert any("mask_sample" in p for p in check_result(result(good, instance_config={"mask_sample": "yes"})))
    other = output_items([turn(0, [5], [2])], [], "t")
    assert any("first-turn prompts differ" in p for p in check_group([result(good), result(other)]))


def test_row_tools_become_chat_specs() -> None:
    row = {"responses_create_params": {"tools": [
        {"type": "function", "name": "bash", "description": "d", "parameters": {"type": "object"}, "strict": False},
        {"type": "web_search"},
    ]}}  # fmt: skip
    assert chat_tool_specs(row) == [
        {
            "type": "function",
            "function": {"name": "bash", "description": "d", "parameters": {"type": "object"}},
        }
    ]
