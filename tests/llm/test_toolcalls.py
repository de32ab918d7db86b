# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Tool-call parsing: well-formed calls parse; every malformed call is an error observation."""

from __future__ import annotations

from nemo_gym_prorl.llm.toolcalls import parse_hermes, parse_server_tool_calls, tool_call_to_openai


def test_a_hermes_call_is_parsed_and_removed_from_the_content() -> None:
    parsed = parse_hermes(
        'Let me run it.\n<tool_call>\n{"name": "bash", "arguments": {"cmd": "ls"}}\n</tool_call>', turn=2
    )
    assert parsed.content == "Let me run it."
    assert [(c.id, c.name, c.arguments) for c in parsed.calls] == [("call_2_0", "bash", {"cmd": "ls"})]
    assert parsed.errors == []


def test_several_calls_keep_their_order_and_ids_are_deterministic() -> None:
    text = '<tool_call>{"name": "a", "arguments": {}}</tool_call><tool_call>{"name": "b", "arguments": {"x": 1}}</tool_call>'
    assert [(c.id, c.name) for c in parse_hermes(text).calls] == [("call_0_0", "a"), ("call_0_1", "b")]
    assert parse_hermes(text).calls == parse_hermes(text).calls


def test_non_json_tool_call_text_becomes_an_error_observation_not_an_exception() -> None:
    parsed = parse_hermes("<tool_call>run ls please</tool_call>")
    assert parsed.calls == []
    [error] = parsed.errors
    assert "not valid JSON" in error.error and error.raw == "run ls please"
    message = error.to_tool_message()
    assert message.role == "tool" and message.tool_call_id == error.id
    assert "could not parse" in (message.content or "")


def test_missing_name_wrong_types_and_string_arguments() -> None:
    assert "name" in parse_hermes('<tool_call>{"arguments": {}}</tool_call>').errors[0].error
    assert "object" in parse_hermes("<tool_call>[1, 2]</tool_call>").errors[0].error
    assert (
        "JSON object"
        in parse_hermes('<tool_call>{"name": "f", "arguments": [1]}</tool_call>').errors[0].error
    )
    # Double-encoded arguments are a common model habit: accepted.
    [call] = parse_hermes('<tool_call>{"name": "f", "arguments": "{\\"x\\": 1}"}</tool_call>').calls
    assert call.arguments == {"x": 1}
    assert (
        "not valid JSON"
        in parse_hermes('<tool_call>{"name": "f", "arguments": "{x"}</tool_call>').errors[0].error
    )


def test_a_call_cut_off_by_max_tokens_is_an_error() -> None:
    parsed = parse_hermes('Running.<tool_call>{"name": "bash", "argu')
    assert parsed.content == "Running." and parsed.calls == []
    assert parsed.errors[0].error == "unterminated <tool_call> block"


def test_plain_text_has_no_calls() -> None:
    parsed = parse_hermes("The answer is 4.")
    assert parsed.content == "The answer is 4." and parsed.calls == [] and parsed.errors == []


def test_server_parsed_tool_calls_keep_their_ids_and_bad_arguments_become_errors() -> None:
    parsed = parse_server_tool_calls(
        [
            {"id": "abc", "type": "function", "function": {"name": "bash", "arguments": '{"cmd": "ls"}'}},
            {"id": "def", "type": "function", "function": {"name": "bash", "arguments": "{oops"}},
            {"id": "ghi", "type": "function"},
            "nonsense",
        ]
    )
    assert [(c.id, c.arguments) for c in parsed.calls] == [("abc", {"cmd": "ls"})]
    assert [e.id for e in parsed.errors] == ["def", "ghi", "call_0_3"]


def test_a_parsed_call_round_trips_to_the_openai_wire_form() -> None:
    [call] = parse_hermes('<tool_call>{"name": "f", "arguments": {"x": 1}}</tool_call>').calls
    [again] = parse_server_tool_calls([tool_call_to_openai(call)]).calls
    assert (again.id, again.name, again.arguments) == (call.id, call.name, call.arguments)
