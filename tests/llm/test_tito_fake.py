# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Token-in/token-out sessions against the scripted backend (exact, readable token maths)."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from conftest import FakeFactory, fast_pool
from support.fake_llm import IM_END, detokenize, render_chat, tokenize_text

from nemo_gym_prorl.llm.dialects.nemo_rl import NemoRLChatDialect
from nemo_gym_prorl.llm.dialects.vllm import VLLMCompletionsDialect, bridge_ids
from nemo_gym_prorl.llm.errors import NonContiguousError, RetriesExhaustedError
from nemo_gym_prorl.llm.pool import LLMBackendPool
from nemo_gym_prorl.llm.records import SamplingParams
from nemo_gym_prorl.llm.tito import SessionClosedError, TokenSession

SYSTEM = {"role": "system", "content": "You are terse."}
USER = {"role": "user", "content": "List files."}


def pool_for(*urls: str) -> LLMBackendPool:
    return fast_pool(*urls)


def tool(content: str, call_id: str = "call_0_0") -> dict[str, Any]:
    return {"role": "tool", "content": content, "tool_call_id": call_id}


def assert_contiguous(session: TokenSession) -> None:
    for previous, current in itertools.pairwise(session.turns):
        assert current.prompt_token_ids[: len(previous.full_token_ids)] == previous.full_token_ids


async def test_vllm_dialect_first_turn_is_the_chat_template_and_text_comes_from_the_ids(
    fake_llm: FakeFactory,
) -> None:
    backend = await fake_llm(responder=lambda prompt: "hello")
    async with pool_for(backend.url) as pool:
        session = TokenSession(pool, VLLMCompletionsDialect(), model="fake")
        turn = await session.generate([SYSTEM, USER])
    assert turn.prompt_token_ids == tokenize_text(render_chat([SYSTEM, USER], add_generation_prompt=True))
    assert turn.generation_token_ids == [*tokenize_text("hello"), IM_END]
    assert turn.text == detokenize(turn.generation_token_ids, skip_special=True) == "hello"
    assert turn.finish_reason == "stop" and turn.dialect == "vllm"
    assert len(turn.generation_log_probs) == len(turn.generation_token_ids)


async def test_vllm_dialect_appends_only_the_new_messages_as_a_token_delta(fake_llm: FakeFactory) -> None:
    backend = await fake_llm()
    async with pool_for(backend.url) as pool:
        session = TokenSession(pool, VLLMCompletionsDialect(), model="fake")
        first = await session.generate([SYSTEM, USER])
        second = await session.generate([tool("a.txt"), tool("")])  # two tool messages, one empty
    # The exact expected prompt: history + the template's "\n" after <|im_end|> + the new messages.
    new_text = "\n<|im_start|>tool\na.txt<|im_end|>\n<|im_start|>tool\n<|im_end|>\n<|im_start|>assistant\n"
    assert second.prompt_token_ids == [*first.full_token_ids, *tokenize_text(new_text)]
    # The history itself was never sent to /tokenize again: only the fixed anchor was.
    tokenized = [
        body["messages"] for path, body in backend.requests if path == "/tokenize" and "messages" in body
    ]
    assert all(USER not in messages for messages in tokenized[1:])


async def test_a_generation_cut_by_max_tokens_is_closed_before_new_messages(fake_llm: FakeFactory) -> None:
    backend = await fake_llm(responder=lambda prompt: "a long answer")
    async with pool_for(backend.url) as pool:
        session = TokenSession(
            pool, VLLMCompletionsDialect(), model="fake", sampling=SamplingParams(max_tokens=3)
        )
        first = await session.generate([USER])
        assert first.finish_reason == "length" and IM_END not in first.generation_token_ids
        second = await session.generate([{"role": "user", "content": "go on"}])
    closing = tokenize_text("<|im_end|>\n<|im_start|>user\ngo on<|im_end|>\n<|im_start|>assistant\n")
    assert second.prompt_token_ids == [*first.full_token_ids, *closing]


def test_the_bridge_supplies_exactly_what_the_model_did_not_sample() -> None:
    close = [IM_END, 1234]
    assert bridge_ids([5, 6, IM_END], close) == [1234]  # stopped on its end-of-turn token
    assert bridge_ids([5, 6], close) == close  # cut by max_tokens
    assert bridge_ids([], close) == close


async def test_six_turns_with_tools_stay_contiguous(fake_llm: FakeFactory) -> None:
    backend = await fake_llm()
    follow_ups: list[list[dict[str, Any]]] = [
        [tool("file1\nfile2")],
        [tool("x"), tool("")],
        [{"role": "user", "content": "and now?"}],
        [tool("")],
        [tool("done"), tool("also done")],
    ]
    async with pool_for(backend.url) as pool:
        session = TokenSession(pool, VLLMCompletionsDialect(), model="fake")
        await session.generate([SYSTEM, USER])
        for messages in follow_ups:
            await session.generate(messages)
    assert len(session.turns) == 6
    assert_contiguous(session)
    # With a tokenizer where text round-trips exactly, the spliced history equals what the
    # template renders for the whole conversation (everything before the last answer).
    conversation = session.messages[:-1]
    assert session.turns[-1].prompt_token_ids == tokenize_text(
        render_chat(conversation, add_generation_prompt=True)
    )


async def test_hermes_tool_calls_are_parsed_and_malformed_ones_become_observations(
    fake_llm: FakeFactory,
) -> None:
    replies = iter(
        [
            '<tool_call>{"name": "bash", "arguments": {"cmd": "ls"}}</tool_call>',
            "<tool_call>ls -la</tool_call>",
        ]
    )
    backend = await fake_llm(responder=lambda prompt: next(replies))
    async with pool_for(backend.url) as pool:
        session = TokenSession(pool, VLLMCompletionsDialect(), model="fake")
        good = await session.generate([USER])
        assert [(c.name, c.arguments) for c in good.tool_calls] == [("bash", {"cmd": "ls"})]
        bad = await session.generate([tool("a.txt", good.tool_calls[0].id)])
    assert bad.tool_calls == [] and len(bad.tool_call_errors) == 1
    assert bad.tool_call_errors[0].to_tool_message().role == "tool"


async def test_a_prompt_longer_than_the_context_ends_with_length_not_an_error(fake_llm: FakeFactory) -> None:
    backend = await fake_llm(max_model_len=300)
    async with pool_for(backend.url) as pool:
        session = TokenSession(pool, VLLMCompletionsDialect(), model="fake")
        await session.generate([USER])
        turn = await session.generate([tool("x" * 400)])
        assert turn.finish_reason == "length" and turn.context_exhausted
        assert turn.generation_token_ids == [] and session.finished
        assert len(backend.generation_requests()) == 1  # the over-long prompt was never sent
        with pytest.raises(SessionClosedError):
            await session.generate([tool("more")])
    assert session.record().context_exhausted and session.record().failure is None


async def test_max_tokens_is_clamped_to_what_the_context_has_left(fake_llm: FakeFactory) -> None:
    backend = await fake_llm(max_model_len=200)
    async with pool_for(backend.url) as pool:
        session = TokenSession(
            pool, VLLMCompletionsDialect(), model="fake", sampling=SamplingParams(max_tokens=10_000)
        )
        turn = await session.generate([USER])
    assert backend.generation_requests()[0]["max_tokens"] == 200 - len(turn.prompt_token_ids)


async def test_nan_log_probs_are_rejected_and_retried(fake_llm: FakeFactory) -> None:
    backend = await fake_llm(faults=["nan"])
    async with pool_for(backend.url) as pool:
        session = TokenSession(pool, VLLMCompletionsDialect(), model="fake")
        turn = await session.generate([USER])
    assert len(backend.generation_requests()) == 2
    assert all(lp == lp for lp in turn.generation_log_probs)


async def test_a_backend_killed_mid_trajectory_reroutes_and_the_continuation_is_exact(
    fake_llm: FakeFactory,
) -> None:
    a, b = await fake_llm(), await fake_llm()
    async with pool_for(a.url, b.url) as pool:
        session = TokenSession(pool, VLLMCompletionsDialect(), model="fake")
        first = await session.generate([SYSTEM, USER])
        victim, survivor = (a, b) if first.backend == a.url else (b, a)
        await victim.kill()
        second = await session.generate([tool("a.txt")])
        third = await session.generate([tool("b.txt")])
    assert second.backend == third.backend == survivor.url
    assert_contiguous(session)
    [move] = session.record().reroutes
    assert (move.turn, move.from_backend, move.to_backend) == (1, victim.url, survivor.url)


async def test_an_unrecoverable_backend_failure_marks_the_trajectory_as_infrastructure(
    fake_llm: FakeFactory,
) -> None:
    backend = await fake_llm(always="500")
    async with pool_for(backend.url) as pool:
        session = TokenSession(pool, VLLMCompletionsDialect(), model="fake")
        with pytest.raises(RetriesExhaustedError):
            await session.generate([USER])
        failure = session.record().failure
        assert failure is not None and failure.infrastructure and failure.turn == 0
        with pytest.raises(SessionClosedError):
            await session.generate([USER])


async def test_nemo_rl_request_has_the_policy_servers_sampling_and_token_carrying_history(
    fake_llm: FakeFactory,
) -> None:
    backend = await fake_llm(nemo_rl_shape=True, splice=True)
    sampling = SamplingParams(temperature=0.7, top_p=0.95, max_tokens=64)
    async with pool_for(backend.url) as pool:
        session = TokenSession(
            pool, NemoRLChatDialect(), model="policy", sampling=sampling, tools=[{"type": "function"}]
        )
        first = await session.generate([SYSTEM, USER])
        second = await session.generate([tool("a.txt"), tool("")])
    request = backend.generation_requests()[1]
    assert request["temperature"] == 0.7 and request["top_p"] == 0.95 and "top_k" not in request
    assert request["logprobs"] is True and request["top_logprobs"] == 0
    assistant = request["messages"][2]
    assert assistant["role"] == "assistant"
    assert assistant["prompt_token_ids"] == first.prompt_token_ids
    assert assistant["generation_token_ids"] == first.generation_token_ids
    assert [m["role"] for m in request["messages"]] == ["system", "user", "assistant", "tool", "tool"]
    assert request["tools"] == [{"type": "function"}]
    assert_contiguous(session)
    assert second.generation_log_probs == [-0.25] * len(second.generation_token_ids)


async def test_nemo_rl_dialect_reads_plain_vllm_token_fields_too(fake_llm: FakeFactory) -> None:
    backend = await fake_llm(responder=lambda prompt: "hi")
    async with pool_for(backend.url) as pool:
        session = TokenSession(pool, NemoRLChatDialect(), model="fake")
        turn = await session.generate([USER])
    assert turn.prompt_token_ids == tokenize_text(render_chat([USER], add_generation_prompt=True))
    assert turn.generation_token_ids == [*tokenize_text("hi"), IM_END] and turn.text == "hi"


async def test_both_dialects_agree_on_the_first_turn(fake_llm: FakeFactory) -> None:
    backend = await fake_llm()
    async with pool_for(backend.url) as pool:
        a = await TokenSession(pool, VLLMCompletionsDialect(), model="fake").generate([SYSTEM, USER])
        b = await TokenSession(pool, NemoRLChatDialect(), model="fake").generate([SYSTEM, USER])
    assert (a.prompt_token_ids, a.generation_token_ids, a.text) == (
        b.prompt_token_ids,
        b.generation_token_ids,
        b.text,
    )


async def test_a_server_that_re_templates_history_differently_is_caught(fake_llm: FakeFactory) -> None:
    # Without splicing, the server re-renders the assistant's text, and text cannot carry
    # what detokenization dropped (here a special token the model sampled mid-answer).
    backend = await fake_llm(responder=lambda prompt: "a<|im_start|>b")
    async with pool_for(backend.url) as pool:
        session = TokenSession(pool, NemoRLChatDialect(), model="fake")
        first = await session.generate([USER])
        assert first.text == "ab" and len(first.generation_token_ids) == 4
        with pytest.raises(NonContiguousError):
            await session.generate([{"role": "user", "content": "more"}])
    failure = session.record().failure
    assert failure is not None and failure.kind == "NonContiguousError"


async def test_nemo_rl_context_overflow_ends_with_length(fake_llm: FakeFactory) -> None:
    backend = await fake_llm(nemo_rl_shape=True, splice=True, max_model_len=250)
    async with pool_for(backend.url) as pool:
        session = TokenSession(pool, NemoRLChatDialect(), model="fake")
        await session.generate([USER])
        turn = await session.generate([tool("y" * 300)])
    assert turn.finish_reason == "length" and turn.context_exhausted and session.finished


async def test_closing_a_session_releases_its_sticky_binding(fake_llm: FakeFactory) -> None:
    backend = await fake_llm()
    async with pool_for(backend.url) as pool:
        session = TokenSession(pool, VLLMCompletionsDialect(), model="fake")
        await session.generate([USER])
        assert pool.stats().endpoints[0].bound == 1
        session.close()
        assert pool.stats().endpoints[0].bound == 0


async def test_constrained_vllm_dialect_sends_a_structural_tag_per_turn_and_records_it(
    fake_llm: FakeFactory,
) -> None:
    from nemo_gym_prorl.llm.dialects import ConstrainedToolCalls, TrajectoryConstraint

    bash = {"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}
    reply = '<tool_call>\n{"name": "bash", "arguments": {"cmd": "ls"}}\n</tool_call>'
    backend = await fake_llm(responder=lambda prompt: reply)
    dialect = VLLMCompletionsDialect(
        constrained=ConstrainedToolCalls(enabled=True, tool_turns=1, answer_turn=1)
    )
    constraint = TrajectoryConstraint(tools=[bash], answer_pattern="Answer: [AB]")
    async with pool_for(backend.url) as pool:
        session = TokenSession(pool, dialect, model="fake", constraint=constraint)
        first = await session.generate([SYSTEM, USER])
        second = await session.generate([tool("a.txt")])
    sent = [json.loads(b["structured_outputs"]["structural_tag"]) for b in backend.generation_requests()]
    assert sent[0]["format"]["tags"][0]["begin"].startswith('<tool_call>\n{"name": "bash"')
    assert sent[1]["format"] == {"type": "regex", "pattern": "Answer: [AB]"}
    assert [c.name for c in first.tool_calls] == ["bash"]
    assert first.decoding is not None and first.decoding["mode"] == "tool"
    assert second.decoding is not None and second.decoding["mode"] == "answer"


async def test_an_unconstrained_dialect_sends_no_structured_outputs(fake_llm: FakeFactory) -> None:
    from nemo_gym_prorl.llm.dialects import TrajectoryConstraint

    backend = await fake_llm(responder=lambda prompt: "hi")
    constraint = TrajectoryConstraint(tools=[], answer_pattern="x")
    async with pool_for(backend.url) as pool:
        turn = await TokenSession(
            pool, VLLMCompletionsDialect(), model="fake", constraint=constraint
        ).generate([SYSTEM, USER])
    assert "structured_outputs" not in backend.generation_requests()[0] and turn.decoding is None
