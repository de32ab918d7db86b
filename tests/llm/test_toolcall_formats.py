# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Each tool-call format models write, from its public documentation's examples (vLLM's tool
calling guide, Meta's Llama 3.1/3.2 prompt formats, mistral-common, Qwen3-Coder's template):
well-formed calls parse in order; broken ones become error observations, never exceptions."""

from __future__ import annotations

import pytest

from nemo_gym_prorl.llm.toolcalls import (
    PARSERS,
    format_from_chat_template,
    parse_llama3_json,
    parse_mistral,
    parse_pythonic,
    parse_qwen3_coder,
    parse_tool_calls,
    resolve_tool_call_format,
)

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "days": {"type": "integer"},
                "metric": {"type": "boolean"},
                "units": {"type": "object"},
            },
        },
    },
}


def calls(parsed) -> list[tuple[str, dict]]:  # type: ignore[no-untyped-def]
    return [(c.name, c.arguments) for c in parsed.calls]


# -- Llama 3 JSON -------------------------------------------------------------------------------


def test_llama3_json_call_after_the_python_tag() -> None:
    text = '<|python_tag|>{"name": "get_current_conditions", "parameters": {"location": "San Francisco, CA", "unit": "Fahrenheit"}}'
    parsed = parse_llama3_json(text, turn=1)
    assert calls(parsed) == [
        ("get_current_conditions", {"location": "San Francisco, CA", "unit": "Fahrenheit"})
    ]
    assert parsed.calls[0].id == "call_1_0" and parsed.content == "" and parsed.errors == []


def test_llama3_json_bare_calls_separated_by_semicolons() -> None:
    text = '{"name": "get_weather", "parameters": {"city": "Paris"}}; {"name": "get_time", "parameters": {}}'
    assert calls(parse_llama3_json(text)) == [("get_weather", {"city": "Paris"}), ("get_time", {})]


def test_llama3_json_prose_is_content_not_a_call() -> None:
    parsed = parse_llama3_json("The weather in Paris is sunny.")
    assert parsed.calls == [] and parsed.errors == [] and parsed.content == "The weather in Paris is sunny."


def test_llama3_json_truncated_call_is_an_error() -> None:
    parsed = parse_llama3_json('{"name": "get_weather", "parameters": {"city": "Par')
    assert parsed.calls == []
    [error] = parsed.errors
    assert "not valid JSON" in error.error and error.raw.startswith('{"name"')


def test_llama3_json_second_call_broken_keeps_the_first() -> None:
    parsed = parse_llama3_json('{"name": "a", "parameters": {}}; {"name": "b", "parameters": [1]}')
    assert calls(parsed) == [("a", {})]
    assert parsed.errors[0].name == "b" and "object" in parsed.errors[0].error


# -- Mistral ------------------------------------------------------------------------------------


def test_mistral_v3_json_array_after_tool_calls_token() -> None:
    text = '[TOOL_CALLS] [{"name": "get_current_weather", "arguments": {"location": "Paris, France", "format": "celsius"}}]'
    parsed = parse_mistral(text)
    assert calls(parsed) == [("get_current_weather", {"location": "Paris, France", "format": "celsius"})]
    assert parsed.content == ""


def test_mistral_v11_name_args_pieces_with_leading_prose() -> None:
    text = 'Let me check both.[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}[TOOL_CALLS]get_weather[ARGS]{"city": "Lyon"}'
    parsed = parse_mistral(text, turn=3)
    assert calls(parsed) == [("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Lyon"})]
    assert [c.id for c in parsed.calls] == ["call_3_0", "call_3_1"]
    assert parsed.content == "Let me check both."


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ('[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": ', "not valid JSON"),
        ('[TOOL_CALLS]get_weather[ARGS]{"city": Paris}', "not valid JSON"),
        ('[TOOL_CALLS][ARGS]{"city": "Paris"}', "missing function name"),
        ('[TOOL_CALLS] [{"arguments": {"city": "Paris"}}]', "name"),
        ("[TOOL_CALLS]", "no call"),
    ],
)
def test_mistral_broken_calls_are_errors(text: str, error: str) -> None:
    parsed = parse_mistral(text)
    assert parsed.calls == [] and error in parsed.errors[0].error


def test_mistral_without_the_token_is_prose() -> None:
    assert parse_mistral("Paris is 18 degrees.").content == "Paris is 18 degrees."


# -- Qwen3-Coder XML ----------------------------------------------------------------------------

QWEN_CALL = """I'll look it up.
<tool_call>
<function=get_weather>
<parameter=city>
San Francisco
</parameter>
<parameter=days>
3
</parameter>
<parameter=metric>
true
</parameter>
<parameter=units>
{"temperature": "celsius"}
</parameter>
</function>
</tool_call>"""


def test_qwen3_coder_parameters_are_typed_by_the_tool_schema() -> None:
    parsed = parse_qwen3_coder(QWEN_CALL, tool_specs=[WEATHER])
    assert calls(parsed) == [
        (
            "get_weather",
            {"city": "San Francisco", "days": 3, "metric": True, "units": {"temperature": "celsius"}},
        )
    ]
    assert parsed.content == "I'll look it up."


def test_qwen3_coder_string_parameters_stay_text_even_when_they_look_like_json() -> None:
    text = (
        "<tool_call>\n<function=get_weather>\n<parameter=city>\n42\n</parameter>\n</function>\n</tool_call>"
    )
    assert calls(parse_qwen3_coder(text, tool_specs=[WEATHER])) == [("get_weather", {"city": "42"})]


def test_qwen3_coder_multiline_code_parameter_keeps_its_inner_newlines() -> None:
    text = "<tool_call>\n<function=ipython>\n<parameter=code>\nx = 1\nprint(x + 1)\n</parameter>\n</function>\n</tool_call>"
    assert calls(parse_qwen3_coder(text)) == [("ipython", {"code": "x = 1\nprint(x + 1)"})]


def test_qwen3_coder_two_calls_in_order() -> None:
    text = "<tool_call>\n<function=a>\n</function>\n</tool_call>\n<tool_call>\n<function=b>\n<parameter=x>\nhi\n</parameter>\n</function>\n</tool_call>"
    assert calls(parse_qwen3_coder(text)) == [("a", {}), ("b", {"x": "hi"})]


def test_qwen3_coder_unterminated_function_is_an_error() -> None:
    parsed = parse_qwen3_coder("<tool_call>\n<function=get_weather>\n<parameter=city>\nPar")
    assert parsed.calls == [] and "unterminated" in parsed.errors[0].error


def test_qwen3_coder_nameless_function_is_an_error() -> None:
    parsed = parse_qwen3_coder("<tool_call>\n<function=>\n</function>\n</tool_call>")
    assert parsed.calls == [] and "missing function name" in parsed.errors[0].error


# -- pythonic -----------------------------------------------------------------------------------


def test_pythonic_list_of_calls() -> None:
    text = (
        "[get_weather(city='San Francisco', metric='celsius'), get_weather(city='Seattle', metric='celsius')]"
    )
    parsed = parse_pythonic(text)
    assert calls(parsed) == [
        ("get_weather", {"city": "San Francisco", "metric": "celsius"}),
        ("get_weather", {"city": "Seattle", "metric": "celsius"}),
    ]


def test_pythonic_llama4_wrapper_and_literal_kinds() -> None:
    text = "<|python_start|>[search(query=\"x\", top_k=3, exact=True, tags=['a', 'b'], opts={'lang': 'en'}), now()]<|python_end|>"
    assert calls(parse_pythonic(text)) == [
        ("search", {"query": "x", "top_k": 3, "exact": True, "tags": ["a", "b"], "opts": {"lang": "en"}}),
        ("now", {}),
    ]


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("[get_weather(city='Paris'", "not a Python list"),
        ("[get_weather('Paris')]", "positional"),
        ("[get_weather(city=somewhere)]", "literals"),
        ("[get_weather(city='Paris'), 42]", "not a function call"),
    ],
)
def test_pythonic_broken_calls_are_errors(text: str, error: str) -> None:
    parsed = parse_pythonic(text)
    assert error in parsed.errors[0].error


def test_pythonic_prose_and_plain_lists_are_content() -> None:
    assert parse_pythonic("The answer is [1, 2].").calls == []
    assert parse_pythonic("[1, 2, 3]").content == "[1, 2, 3]"


# -- choosing a format ----------------------------------------------------------------------------


def test_every_format_has_a_parser_and_unknown_ones_are_refused() -> None:
    assert set(PARSERS) == {"hermes", "llama3_json", "mistral", "qwen3_coder", "pythonic"}
    with pytest.raises(ValueError, match="unknown tool-call format"):
        parse_tool_calls("x", "json5")  # type: ignore[arg-type]


def test_the_same_call_in_every_format_parses_to_the_same_call() -> None:
    written = {
        "hermes": '<tool_call>\n{"name": "bash", "arguments": {"cmd": "ls -la"}}\n</tool_call>',
        "llama3_json": '{"name": "bash", "parameters": {"cmd": "ls -la"}}',
        "mistral": '[TOOL_CALLS][{"name": "bash", "arguments": {"cmd": "ls -la"}}]',
        "qwen3_coder": "<tool_call>\n<function=bash>\n<parameter=cmd>\nls -la\n</parameter>\n</function>\n</tool_call>",
        "pythonic": "[bash(cmd='ls -la')]",
    }
    for name, text in written.items():
        assert calls(parse_tool_calls(text, name)) == [("bash", {"cmd": "ls -la"})], name  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("snippet", "expected"),
    [
        (
            "{% for tool in tools %}<function={{ tool.name }}><parameter={{ p }}>{% endfor %}<tool_call>",
            "qwen3_coder",
        ),
        ("{%- if message.tool_calls %}[TOOL_CALLS]{{ message.tool_calls | tojson }}", "mistral"),
        (
            "[func_name1(params_name1=params_value1, params_name2=params_value2...), func_name2(params)]",
            "pythonic",
        ),
        (
            '{"name": function name, "parameters": dictionary of argument name and its value}. <|python_tag|>',
            "llama3_json",
        ),
        ('<tool_call>\\n{"name": <function-name>, "arguments": <args-json-object>}\\n</tool_call>', "hermes"),
        ("{% for message in messages %}<|im_start|>{{ message['role'] }}{% endfor %}", None),
        (None, None),
    ],
)
def test_the_format_is_read_from_the_chat_template(snippet: str | None, expected: str | None) -> None:
    assert format_from_chat_template(snippet) == expected


def test_auto_reads_a_model_directory_and_falls_back_to_hermes(tmp_path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "tokenizer_config.json").write_text('{"chat_template": "x [TOOL_CALLS] y"}')
    assert resolve_tool_call_format("auto", tmp_path) == "mistral"
    assert resolve_tool_call_format("auto", tmp_path / "missing") == "hermes"
    assert resolve_tool_call_format("pythonic", tmp_path) == "pythonic"
