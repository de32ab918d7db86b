# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Constrained tool calling: the structural tag each turn gets, from the tools and the policy,
and the request the vllm dialect sends with it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from nemo_gym_prorl.llm.dialects import ConstrainedToolCalls, TrajectoryConstraint, make_dialect
from nemo_gym_prorl.llm.dialects.structured import bounded_schema, decoding_summary, structural_tag
from nemo_gym_prorl.llm.records import TurnRecord

IPYTHON = {
    "type": "function",
    "name": "ipython",
    "parameters": {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]},
}
SUBMIT = {
    "type": "function",
    "function": {
        "name": "submit",
        "parameters": {
            "type": "object",
            "properties": {"answer": {"type": "string"}},
            "required": ["answer"],
        },
    },
}
BOXED = r"\\boxed\{[^{}\n]{1,40}\}"
POLICY = ConstrainedToolCalls(enabled=True, tool_turns=2, answer_turn=3, max_string_length=100)
MATH = TrajectoryConstraint(tools=[IPYTHON, SUBMIT], answer_pattern=BOXED)


def tag(policy: ConstrainedToolCalls, constraint: TrajectoryConstraint, turn: int) -> dict[str, Any]:
    built = structural_tag(policy, constraint, turn)
    assert built is not None
    return built[0]


def test_tool_turns_force_exactly_one_call_of_a_working_tool() -> None:
    fmt = tag(POLICY, MATH, 0)["format"]
    assert fmt["type"] == "triggered_tags" and fmt["triggers"] == ["<tool_call>"]
    assert fmt["at_least_one"] and fmt["stop_after_first"]
    [ipython] = fmt["tags"]
    assert ipython["begin"] == '<tool_call>\n{"name": "ipython", "arguments": '
    assert ipython["end"] == "}\n</tool_call>"
    assert ipython["content"]["json_schema"]["properties"]["code"]["maxLength"] == 100
    assert tag(POLICY, MATH, 1) == tag(POLICY, MATH, 0)


def test_between_the_policies_turns_the_model_may_call_any_tool_or_answer() -> None:
    fmt = tag(POLICY, MATH, 2)["format"]
    assert fmt["type"] == "or"
    calls, answer = fmt["elements"]
    assert [t["begin"].split('"')[3] for t in calls["tags"]] == ["ipython", "submit"]
    assert answer == {"type": "regex", "pattern": BOXED}


def test_from_the_answer_turn_only_the_finish_tool_or_the_answer_format() -> None:
    built = structural_tag(POLICY, MATH, 3)
    assert built is not None
    fmt, record = built[0]["format"], built[1]
    assert [t["begin"].split('"')[3] for t in fmt["elements"][0]["tags"]] == ["submit"]
    assert record.mode == "answer" and record.tools == ["submit"] and record.answer_pattern == BOXED


def test_the_finish_tools_answer_can_be_held_to_the_value_the_evaluator_reads() -> None:
    from nemo_gym_prorl.agent.answer_formats import submit_pattern

    pattern = submit_pattern({"answer_type": "mc", "letters": "ABCD"})
    assert pattern == "^[ABCD]$"
    constraint = TrajectoryConstraint(tools=[IPYTHON, SUBMIT], submit_pattern=pattern)
    built = structural_tag(POLICY, constraint, 3)
    assert built is not None
    fmt, record = built[0]["format"], built[1]
    [submit] = fmt["tags"]
    assert submit["content"]["json_schema"]["properties"]["answer"]["pattern"] == pattern
    assert record.submit_pattern == pattern
    working = tag(POLICY, constraint, 0)["format"]["tags"][0]
    assert "pattern" not in working["content"]["json_schema"]["properties"]["code"]
    assert submit_pattern({"data_source": "prorl_code"}) is None


def test_an_answer_turn_without_finish_tool_is_the_answer_format_alone() -> None:
    code = TrajectoryConstraint(tools=[IPYTHON], answer_pattern=r"```python\n[^`]{1,400}\n```")
    assert tag(POLICY, code, 5)["format"] == {"type": "regex", "pattern": code.answer_pattern}


def test_nothing_to_constrain_sends_no_tag() -> None:
    swe = TrajectoryConstraint(tools=[IPYTHON], answer_pattern=None)
    assert structural_tag(POLICY, swe, 3) is None  # answer turn, no finish tool, no format
    assert structural_tag(POLICY, swe, 0) is not None
    no_answer = POLICY.model_copy(update={"constrain_answer": False})
    assert structural_tag(no_answer, TrajectoryConstraint(tools=[IPYTHON], answer_pattern=BOXED), 3) is None


def test_other_formats_get_their_own_markup() -> None:
    llama = tag(POLICY.model_copy(update={"tool_format": "llama3_json"}), MATH, 0)["format"]
    assert (
        llama["triggers"] == ['{"name": ']
        and llama["tags"][0]["begin"] == '{"name": "ipython", "parameters": '
    )
    qwen = tag(POLICY.model_copy(update={"tool_format": "qwen3_coder"}), MATH, 0)["format"]["tags"][0]
    assert qwen["begin"] == "<tool_call>\n<function=ipython>\n" and qwen["content"]["style"] == "qwen_xml"


def test_every_string_is_bounded_including_nested_ones_but_not_enums() -> None:
    schema = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "maxLength": 5000},
            "mode": {"type": "string", "enum": ["view", "create"]},
            "lines": {"type": "array", "items": {"type": ["string", "null"]}},
            "short": {"type": "string", "maxLength": 10},
        },
    }
    out = bounded_schema(schema, 64)
    assert out["properties"]["path"]["maxLength"] == 64
    assert "maxLength" not in out["properties"]["mode"]
    assert out["properties"]["lines"]["items"]["maxLength"] == 64
    assert out["properties"]["short"]["maxLength"] == 10
    assert "maxLength" not in schema["properties"]["lines"]["items"]  # the input is not changed


def test_the_policy_refuses_an_answer_turn_before_the_tool_turns() -> None:
    with pytest.raises(ValidationError, match="answer_turn"):
        ConstrainedToolCalls(enabled=True, tool_turns=3, answer_turn=1)


def test_constrained_calls_are_an_option_of_the_vllm_dialect_only() -> None:
    on = ConstrainedToolCalls(enabled=True)
    assert make_dialect("vllm", constrained=on).tool_call_format == "hermes"
    with pytest.raises(ValueError, match="needs the `vllm` dialect"):
        make_dialect("nemo_rl", constrained=on)
    with pytest.raises(ValueError, match="would not be read"):
        make_dialect("vllm", constrained=on, tool_call_format="pythonic")
    assert make_dialect("nemo_rl", tool_call_format="mistral").tool_call_format == "mistral"


def test_a_trajectory_summary_says_which_turns_were_constrained_and_how() -> None:
    built = [structural_tag(POLICY, MATH, t) for t in range(4)]

    def turn(i: int, decoding: dict[str, Any] | None) -> TurnRecord:
        return TurnRecord(
            turn=i,
            prompt_token_ids=[1],
            generation_token_ids=[2],
            generation_log_probs=[-0.1],
            finish_reason="stop",
            text="",
            content="",
            dialect="vllm",
            decoding=decoding,
        )

    turns = [turn(i, b[1].model_dump() if b else None) for i, b in enumerate(built)]
    summary = decoding_summary(turns)
    assert summary is not None
    assert summary["constrained_turns"] == 4 and summary["unconstrained_turns"] == 0
    assert summary["turn_modes"] == {"tool": 2, "tool_or_answer": 1, "answer": 1}
    assert summary["answer_pattern"] == BOXED and "constrained" in summary["log_probs"]
    assert decoding_summary([turn(0, None)]) is None
    json.dumps(summary)  # it goes into JSON records as is
