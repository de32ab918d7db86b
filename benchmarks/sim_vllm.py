# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Simulated vLLM backends that act as a tool-using agent: SIMULATED, for load benchmarks only.

What is simulated: the model. Each backend speaks what the service's `vllm` dialect uses
(`/tokenize` with a ChatML template, `/v1/completions` with token-id prompts, token ids and
log-probs, `/v1/models`, `/health`) and decides its reply from the prompt like a scripted
agent: a tool call for the first `tool_turns` turns (the IPython tool where the task offers
it, else bash), then the task's final answer (`submit` where offered, else `\\boxed{}`).

What is made real-sized: every reply is `reply_tokens` tokens with a log-prob each, token ids
are in a real vocabulary's range (so each costs the service a Python int, as real ids do), and
the time a reply takes is vLLM-like: up to `max_num_seqs` sequences run at once (more wait
in FIFO order, as vLLM's scheduler queues them), each taking `ttft_s` plus `reply_tokens`
at `decode_tokens_per_s`.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
from typing import Any

from pydantic import BaseModel

IM_START, IM_END = 151644, 151645  # Qwen's ids for ChatML's markers: far past the byte range
BYTE_BASE = 1000  # byte b is token BYTE_BASE + b
_ASSISTANT_TURN = [IM_START, *(BYTE_BASE + b for b in b"assistant\n")]
_RUN_THIS = re.compile(r"run this command: `([^`]+)`")
_TOOL_RESPONSE = re.compile(r"</?tool_response>")
_FILLER = "Let me work through this step by step and check each part with the tool before answering. "


def _ids(text: str) -> list[int]:
    return [BYTE_BASE + b for b in text.encode()]


def _text(ids: list[int]) -> str:
    return bytes(i - BYTE_BASE for i in ids if BYTE_BASE <= i < BYTE_BASE + 256).decode("utf-8", "replace")


def _chatml(messages: list[dict[str, Any]], add_generation_prompt: bool) -> list[int]:
    ids: list[int] = []
    for m in messages:
        content = m.get("content") or ""
        if not isinstance(content, str):
            content = json.dumps(content)
        ids += [IM_START, *_ids(f"{m['role']}\n{content}"), IM_END, *_ids("\n")]
    if add_generation_prompt:
        ids += _ASSISTANT_TURN
    return ids


def _messages(prompt: list[int]) -> list[tuple[str, str]]:
    """(role, content) of each ChatML message in `prompt`."""
    out, start = [], None
    for i, token in enumerate(prompt):
        if token == IM_START:
            start = i + 1
        elif token == IM_END and start is not None:
            role, _, content = _text(prompt[start:i]).partition("\n")
            out.append((role, content))
            start = None
    return out


def _turns_done(prompt: list[int]) -> int:
    """Assistant turns already in the prompt (the last marker is the generation prompt)."""
    n, k = 0, len(_ASSISTANT_TURN)
    for i, token in enumerate(prompt):
        if token == IM_START and prompt[i : i + k] == _ASSISTANT_TURN:
            n += 1
    return max(0, n - 1)


class AgentBackendSpec(BaseModel):
    """One simulated backend (see the module doc)."""

    max_num_seqs: int = 256
    # A 256-sequence batch on one GPU: time to first token, then tokens per second per sequence.
    ttft_s: float = 0.5
    decode_tokens_per_s: float = 40.0
    reply_tokens: int = 256
    tool_turns: int = 3
    max_model_len: int = 32768
    p_correct: float = 0.5
    seed: int = 0

    def build(self) -> AgentBackend:
        return AgentBackend(self)


class AgentBackend:
    def __init__(self, spec: AgentBackendSpec) -> None:
        self.spec = spec
        self._seqs = asyncio.Semaphore(spec.max_num_seqs)
        self._random = random.Random(spec.seed)
        self.served = 0

    async def respond(self, method: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
        if path == "/tokenize":
            if "messages" in body:
                ids = _chatml(body["messages"], bool(body.get("add_generation_prompt", True)))
            else:
                ids = _ids(str(body.get("prompt", "")))
            return {"count": len(ids), "max_model_len": self.spec.max_model_len, "tokens": ids}
        if path == "/v1/models":
            return {
                "object": "list",
                "data": [{"id": "simulated-agent", "max_model_len": self.spec.max_model_len}],
            }
        if path == "/v1/completions":
            return await self._complete(body)
        return {"ok": True}

    async def _complete(self, body: dict[str, Any]) -> dict[str, Any]:
        prompt = [int(i) for i in body.get("prompt") or []]
        reply = self.reply(prompt)
        ids = [*_ids(reply), IM_END][: max(1, int(body.get("max_tokens") or self.spec.reply_tokens))]
        async with self._seqs:  # vLLM runs at most max_num_seqs at once; the rest queue
            await asyncio.sleep(self.spec.ttft_s + len(ids) / self.spec.decode_tokens_per_s)
        self.served += 1
        return {
            "choices": [
                {
                    "text": _text(ids),
                    "token_ids": ids,
                    "logprobs": {"token_logprobs": [-0.25] * len(ids)},
                    "finish_reason": "stop" if ids[-1] == IM_END else "length",
                }
            ]
        }

    def reply(self, prompt: list[int]) -> str:
        """The scripted agent's next message for `prompt`, padded to `reply_tokens` bytes."""
        messages = _messages(prompt)
        head = messages[0][1] if messages else ""  # the system prompt describes the tools
        offered = {name for name in ("ipython", "bash", "submit") if f'"{name}"' in head}
        turn = _turns_done(prompt)
        asked = next((m for role, text in messages if role == "user" and (m := _RUN_THIS.search(text))), None)
        tool_turns = 1 if asked else self.spec.tool_turns  # command_output: run it once, then answer
        call: dict[str, Any] | None
        if turn < tool_turns and offered & {"ipython", "bash"}:
            if asked and "bash" in offered:
                call = {"name": "bash", "arguments": {"command": asked.group(1)}}
            elif "ipython" in offered:
                code = f"x = sum(i * i for i in range({turn + 1}000))\nprint(x)"
                call = {"name": "ipython", "arguments": {"code": code}}
            else:
                call = {"name": "bash", "arguments": {"command": f"ls / | head -3; echo $(( {turn} * 7 ))"}}
        elif "submit" in offered:
            # What the tool printed, p_correct of the time (so DAPO's groups are informative).
            seen = [_TOOL_RESPONSE.sub("", text).strip() for role, text in messages if role == "tool"]
            right = seen and self._random.random() < self.spec.p_correct
            call = {"name": "submit", "arguments": {"answer": seen[-1] if right else "42"}}
        else:
            call = None
        tail = f"<tool_call>\n{json.dumps(call)}\n</tool_call>" if call else "The answer is \\boxed{42}."
        room = max(0, self.spec.reply_tokens - 1 - len(tail.encode()))
        thinking = (_FILLER * (room // len(_FILLER) + 1))[:room]
        return thinking + tail
