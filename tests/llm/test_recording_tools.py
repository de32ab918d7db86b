# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""A harness call's `tools` reach the model as `llm.tool_prompt` says: `system` describes them
in the system message (the built-in agent's text, once, the same bytes on every call, so a tool
round-trip still merges) and keeps them from the chat template; `template` hands them to it."""

from __future__ import annotations

import json
from typing import Any

from conftest import FakeFactory, fast_pool
from support.fake_llm import detokenize, render_chat, tokenize_text

from nemo_gym_prorl.llm.access import LLMAccess, ToolPromptStyle
from nemo_gym_prorl.llm.dialects import ConstrainedToolCalls
from nemo_gym_prorl.llm.dialects.vllm import VLLMCompletionsDialect
from nemo_gym_prorl.llm.recording import ChatRequest, RecordingSession
from nemo_gym_prorl.llm.records import SamplingParams
from nemo_gym_prorl.llm.toolprompt import DEFAULT_SYSTEM_PROMPT, system_with_tools

SYSTEM = {"role": "system", "content": "You are an agent with a bash tool."}
TASK = {"role": "user", "content": "What is 6 times 7?"}
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "bash",
            "description": "Run a bash command.",
            "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
        },
    }
]
CALL = '<tool_call>\n{"name": "bash", "arguments": {"command": "echo $((6*7))"}}\n</tool_call>'
SAMPLING = SamplingParams(temperature=1.0, max_tokens=200)


def request(messages: list[dict[str, Any]], **fields: Any) -> ChatRequest:
    return ChatRequest.model_validate({"model": "any", "messages": messages, **fields})


def echoed(reply: dict[str, Any]) -> dict[str, Any]:
    return {**reply["choices"][0]["message"], "refusal": None, "annotations": []}


def scripted(*replies: str) -> Any:
    script = iter(replies)
    return lambda prompt: next(script)


def described(text: str) -> int:
    """How many times a prompt's text describes the bash tool (system block or template)."""
    return text.count(json.dumps(TOOLS[0]["function"]["description"]))


async def session_over(url: str, style: ToolPromptStyle) -> RecordingSession:
    access = LLMAccess(pool=fast_pool(url), dialect=VLLMCompletionsDialect(), model="fake", tool_prompt=style)
    await access.pool.start()
    return RecordingSession(access, sampling=SAMPLING)


async def test_system_style_describes_the_tools_once_in_the_system_message_and_a_round_trip_merges(
    fake_llm: FakeFactory,
) -> None:
    backend = await fake_llm(responder=scripted(CALL, "The product is 42."), max_model_len=32768)
    session = await session_over(backend.url, "system")
    try:
        reply = await session.complete(request([SYSTEM, TASK], tools=TOOLS))
        message = reply["choices"][0]["message"]
        assert reply["choices"][0]["finish_reason"] == "tool_calls"
        assert message["tool_calls"][0]["function"] == {
            "name": "bash",
            "arguments": '{"command": "echo $((6*7))"}',
        }
        result = {"role": "tool", "tool_call_id": message["tool_calls"][0]["id"], "content": "42"}
        final = await session.complete(request([SYSTEM, TASK, echoed(reply), result], tools=TOOLS))
        assert final["choices"][0]["message"] == {"role": "assistant", "content": "The product is 42."}
    finally:
        session.close()
        await session.llm.pool.aclose()
    record = session.record()
    first, second = record.turns
    # The model saw the built-in agent's tool block after the harness's system text, and the
    # template saw no tools (it would have added them a second time).
    shown = {"role": "system", "content": system_with_tools(SYSTEM["content"], TOOLS)}
    assert first.prompt_token_ids == tokenize_text(render_chat([shown, TASK], add_generation_prompt=True))
    assert described(detokenize(first.prompt_token_ids)) == 1
    assert not any("tools" in body for path, body in backend.requests if path == "/tokenize")
    # The tool round-trip extended the first call's exact ids: only the tool message rendered.
    assert len(record.segments) == 1 and [c.merged for c in record.calls] == [False, True]
    assert record.calls[1].merged_by == "messages" and record.calls[1].new_messages == 1
    assert second.prompt_token_ids[: len(first.full_token_ids)] == first.full_token_ids
    assert described(detokenize(second.prompt_token_ids)) == 1
    # What the harness sent is what the conversation keeps; the tool block is the model's view.
    assert [m["role"] for m in session.conversation] == ["system", "user", "assistant", "tool", "assistant"]
    assert session.conversation[0] == SYSTEM and record.calls[0].messages == 2


async def test_system_style_without_a_system_message_leads_with_the_default_one_on_every_call(
    fake_llm: FakeFactory,
) -> None:
    backend = await fake_llm(responder=scripted(CALL, CALL, "42"), max_model_len=32768)
    session = await session_over(backend.url, "system")
    try:
        history = [TASK]
        for _ in range(3):
            reply = await session.complete(request(history, tools=TOOLS))
            call = reply["choices"][0]["message"].get("tool_calls")
            if call:
                result = {"role": "tool", "tool_call_id": call[0]["id"], "content": "42"}
                history = [*history, echoed(reply), result]
    finally:
        session.close()
        await session.llm.pool.aclose()
    record = session.record()
    shown = {"role": "system", "content": system_with_tools(None, TOOLS)}
    assert shown["content"].startswith(DEFAULT_SYSTEM_PROMPT)
    assert record.turns[0].prompt_token_ids == tokenize_text(
        render_chat([shown, TASK], add_generation_prompt=True)
    )
    assert [c.merged for c in record.calls] == [False, True, True] and len(record.segments) == 1
    assert all(described(detokenize(turn.prompt_token_ids)) == 1 for turn in record.turns)
    assert [c.new_messages for c in record.calls] == [2, 1, 1]


async def test_template_style_hands_the_tools_to_the_chat_template_only(fake_llm: FakeFactory) -> None:
    backend = await fake_llm(responder=scripted(CALL), max_model_len=32768)
    session = await session_over(backend.url, "template")
    try:
        reply = await session.complete(request([SYSTEM, TASK], tools=TOOLS))
    finally:
        session.close()
        await session.llm.pool.aclose()
    assert reply["choices"][0]["finish_reason"] == "tool_calls"
    (turn,) = session.record().turns
    assert turn.prompt_token_ids == tokenize_text(
        render_chat([SYSTEM, TASK], add_generation_prompt=True, tools=TOOLS)
    )
    text = detokenize(turn.prompt_token_ids)
    assert described(text) == 1 and "<tools>" not in text


async def test_constrained_tool_calling_constrains_a_harness_call_as_the_built_in_agents(
    fake_llm: FakeFactory,
) -> None:
    backend = await fake_llm(responder=scripted(CALL, "42"), max_model_len=32768)
    policy = ConstrainedToolCalls(enabled=True, tool_turns=1, answer_turn=1)
    access = LLMAccess(pool=fast_pool(backend.url), dialect=VLLMCompletionsDialect(constrained=policy))
    access.model = "fake"
    await access.pool.start()
    session = RecordingSession(access, sampling=SAMPLING)
    try:
        reply = await session.complete(request([SYSTEM, TASK], tools=TOOLS))
        call = reply["choices"][0]["message"]["tool_calls"][0]
        result = {"role": "tool", "tool_call_id": call["id"], "content": "42"}
        await session.complete(request([SYSTEM, TASK, echoed(reply), result], tools=TOOLS))
    finally:
        session.close()
        await access.pool.aclose()
    first, second = backend.generation_requests()
    # The first call must call a working tool (`tool_turns`); from `answer_turn` on, with no
    # finish tool and no answer format, nothing is constrained.
    tag = json.loads(first["structured_outputs"]["structural_tag"])
    assert [t["begin"] for t in tag["format"]["tags"]] == ['<tool_call>\n{"name": "bash", "arguments": ']
    assert "structured_outputs" not in second
    turns = session.record().turns
    assert turns[0].decoding is not None and turns[0].decoding["mode"] == "tool"
    assert turns[1].decoding is None
