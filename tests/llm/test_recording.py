# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""A harness's calls, recorded: an append-only history is one token sequence, a rewritten one
starts a new segment, and the rollout's sampling governs (scripted backend, exact token maths)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from conftest import FakeFactory, fast_pool
from support.fake_llm import HARNESS_SYSTEM, HARNESS_TASK, FakeLLM, render_chat, tokenize_text

from nemo_gym_prorl.llm.access import LLMAccess
from nemo_gym_prorl.llm.dialects.vllm import VLLMCompletionsDialect
from nemo_gym_prorl.llm.recording import (
    BudgetExhausted,
    ChatRequest,
    RecordingRefusal,
    RecordingSession,
)
from nemo_gym_prorl.llm.records import SamplingParams

SYSTEM, TASK = HARNESS_SYSTEM, HARNESS_TASK
ROLLOUT_SAMPLING = SamplingParams(temperature=1.0, top_p=1.0, max_tokens=32)


@asynccontextmanager
async def recording(
    fake_llm: FakeFactory,
    *,
    sampling: SamplingParams = ROLLOUT_SAMPLING,
    max_calls: int | None = None,
    **backend: Any,
) -> AsyncIterator[tuple[FakeLLM, RecordingSession]]:
    """A scripted backend (`backend`: its options) and a recording session over it."""
    server = await fake_llm(**backend)
    async with fast_pool(server.url) as pool:
        access = LLMAccess(pool=pool, dialect=VLLMCompletionsDialect(), model="fake")
        yield server, RecordingSession(access, sampling=sampling, max_calls=max_calls)


def request(messages: list[dict[str, Any]], **fields: Any) -> ChatRequest:
    return ChatRequest.model_validate({"model": "any", "messages": messages, **fields})


def echoed(reply: dict[str, Any]) -> dict[str, Any]:
    """The assistant message as an OpenAI client hands it back: with keys of its own."""
    return {**reply["choices"][0]["message"], "refusal": None, "annotations": []}


async def test_an_append_only_history_is_one_token_sequence(fake_llm: FakeFactory) -> None:
    async with recording(fake_llm, responder=lambda prompt: "```bash\nls\n```") as (_, session):
        history = [SYSTEM, TASK]
        for output in ("a.py", "b.py", "done"):
            reply = await session.complete(request(history))
            history = [*history, echoed(reply), {"role": "user", "content": output}]
        session.close()
    record = session.record()
    assert len(record.segments) == 1 and [c.merged for c in record.calls] == [False, True, True]
    assert record.merged_share == 1.0
    first, second, third = record.turns
    # Each call's prompt is the previous prompt, its exact generated ids, the template's bridge
    # and the new message: one sequence, never re-tokenized.
    bridge_and_user = tokenize_text("\n<|im_start|>user\na.py<|im_end|>\n<|im_start|>assistant\n")
    assert second.prompt_token_ids == [*first.full_token_ids, *bridge_and_user]
    assert third.prompt_token_ids[: len(second.full_token_ids)] == second.full_token_ids
    assert first.prompt_token_ids == tokenize_text(render_chat([SYSTEM, TASK], add_generation_prompt=True))
    assert [c.new_messages for c in record.calls] == [2, 1, 1]  # the reply itself is not rendered again


async def test_a_rewritten_history_starts_a_new_segment_and_says_so(fake_llm: FakeFactory) -> None:
    async with recording(fake_llm, responder=lambda prompt: "thinking") as (_, session):
        reply = await session.complete(request([SYSTEM, TASK]))
        await session.complete(request([SYSTEM, TASK, echoed(reply), {"role": "user", "content": "go"}]))
        # A harness that summarises: its history no longer starts with what was sent before.
        summary = {"role": "user", "content": "Summary so far: nothing works."}
        await session.complete(request([SYSTEM, summary]))
        # A changed reply (the harness edited the model's words) is not the sequence either.
        edited = {"role": "assistant", "content": "edited"}
        await session.complete(request([SYSTEM, summary, edited, {"role": "user", "content": "next"}]))
    record = session.record()
    assert [c.segment for c in record.calls] == [0, 0, 1, 2]
    assert [c.merged for c in record.calls] == [False, True, False, False]
    assert [s.calls for s in record.segments] == [2, 1, 1]
    assert record.merged_share == pytest.approx(1 / 3)  # of the three calls after the first, one extended
    assert record.segments[1].tokens.turns[0].prompt_token_ids == tokenize_text(
        render_chat([SYSTEM, summary], add_generation_prompt=True)
    )


async def test_a_harness_that_drops_every_reply_merges_nothing_and_its_share_reads_zero(
    fake_llm: FakeFactory,
) -> None:
    async with recording(fake_llm, responder=lambda prompt: "no block") as (_, session):
        history = [SYSTEM, TASK]
        for _ in range(4):  # mini-swe-agent after a format error: the reply is gone, an error follows
            await session.complete(request(history))
            history = [*history, {"role": "user", "content": "Format error: one bash block."}]
        session.close()
    record = session.record()
    assert [c.merged for c in record.calls] == [False] * 4 and len(record.segments) == 4
    assert record.merged_share == 0.0


async def test_a_conversation_that_renders_to_the_same_tokens_merges_whatever_its_messages_say(
    fake_llm: FakeFactory,
) -> None:
    async with recording(fake_llm, responder=lambda prompt: "```bash\nls\n```") as (_, session):
        reply = await session.complete(request([SYSTEM, TASK]))
        # The reply comes back under an id of the client's own, a key the template never renders:
        # as messages it is not the reply the session gave, as tokens it is.
        tagged = {**echoed(reply), "tool_call_id": "client-7"}
        second = [SYSTEM, TASK, tagged, {"role": "user", "content": "a.py"}]
        await session.complete(request(second))
        # Words the model never wrote do not render to its ids: a new sequence.
        edited = {"role": "assistant", "content": "```bash\nls -la\n```"}
        await session.complete(request([SYSTEM, TASK, edited, {"role": "user", "content": "a.py"}]))
        session.close()
    record = session.record()
    assert [(c.merged, c.merged_by) for c in record.calls] == [(False, None), (True, "tokens"), (False, None)]
    first, second_turn = record.segments[0].tokens.turns
    assert second_turn.prompt_token_ids[: len(first.full_token_ids)] == first.full_token_ids
    assert second_turn.prompt_token_ids == tokenize_text(render_chat(second, add_generation_prompt=True))
    assert record.merged_share == 0.5


async def test_the_rollouts_sampling_governs_and_the_harness_request_is_recorded(
    fake_llm: FakeFactory,
) -> None:
    reply_text = "a long reply that goes on"
    async with recording(fake_llm, responder=lambda prompt: reply_text) as (backend, session):
        reply = await session.complete(request([TASK], temperature=0.0, top_p=0.5, max_tokens=4))
    sent = backend.generation_requests()[-1]
    assert (sent["temperature"], sent["top_p"]) == (1.0, 1.0)  # what the trainer computes log-probs at
    assert sent["max_tokens"] == 4  # a harness may ask for fewer tokens, never more
    assert session.record().calls[0].requested == {"temperature": 0.0, "top_p": 0.5}
    assert reply["choices"][0]["finish_reason"] == "length"
    assert reply["usage"]["completion_tokens"] == 4


async def test_structured_tool_calls_come_back_in_openai_shape_and_merge(fake_llm: FakeFactory) -> None:
    call = '<tool_call>\n{"name": "bash", "arguments": {"command": "ls"}}\n</tool_call>'
    tools = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]
    longer = ROLLOUT_SAMPLING.model_copy(update={"max_tokens": 200})
    async with recording(fake_llm, sampling=longer, responder=lambda prompt: call) as (_, session):
        reply = await session.complete(request([TASK], tools=tools))
        message = reply["choices"][0]["message"]
        assert reply["choices"][0]["finish_reason"] == "tool_calls"
        assert message["tool_calls"][0]["function"] == {"name": "bash", "arguments": '{"command": "ls"}'}
        answer = {"role": "tool", "tool_call_id": message["tool_calls"][0]["id"], "content": "a.py"}
        await session.complete(request([TASK, echoed(reply), answer], tools=tools))
        # The same conversation with other tools is another policy input: a new segment.
        await session.complete(request([TASK, echoed(reply), answer]))
    assert [c.merged for c in session.record().calls] == [False, True, False]


async def test_calls_beyond_the_budget_or_after_the_end_are_refused(fake_llm: FakeFactory) -> None:
    async with recording(fake_llm, max_calls=1) as (_, session):
        await session.complete(request([TASK]))
        with pytest.raises(BudgetExhausted, match="budget of 1 model calls"):
            await session.complete(request([TASK]))
        session.close()
        with pytest.raises(BudgetExhausted, match="ended"):
            await session.complete(request([TASK]))


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        ({"messages": []}, "at least 1"),
        ({"messages": [TASK], "n": 2}, "one choice"),
        ({"messages": [TASK], "stop": ["\n"]}, "stop sequences"),
    ],
)
def test_requests_a_trajectory_cannot_record_are_refused(fields: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        ChatRequest.model_validate(fields)


async def test_non_text_content_and_unknown_roles_are_refused_before_any_generation(
    fake_llm: FakeFactory,
) -> None:
    async with recording(fake_llm) as (backend, session):
        image = {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}
        with pytest.raises(RecordingRefusal, match="only text content parts"):
            await session.complete(request([image]))
        with pytest.raises(RecordingRefusal, match="unknown message role"):
            await session.complete(request([{"role": "robot", "content": "hi"}]))
        parts = {
            "role": "user",
            "content": [{"type": "text", "text": "Fix "}, {"type": "text", "text": "it."}],
        }
        await session.complete(request([parts]))
    assert backend.generation_requests()[0]["prompt"] == tokenize_text(
        render_chat([{"role": "user", "content": "Fix it."}], add_generation_prompt=True)
    )
