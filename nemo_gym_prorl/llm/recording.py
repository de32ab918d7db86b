# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""A harness's model calls, answered by the policy and recorded token-exact.

An agent harness (mini-swe-agent, a tool-calling SDK) sends its whole conversation with every
chat-completions call. `RecordingSession` answers each call through a `TokenSession` on the
shared backend pool (sticky routing, the policy version current at the call, the rollout's
sampling) and decides, call by call, how the call joins the trajectory:

- **merged**: the call's messages are the previous call's messages plus the reply this session
  gave, plus new messages. Only the new messages are rendered (the chat template's suffix, the
  same rendering as the built-in loop), after the exact ids of everything before, so the whole
  conversation is one token sequence; the tokens the model did not generate are masked later.
- **new segment**: anything else (a harness that truncated, summarised or edited its history,
  or changed its tools). The call starts a new token sequence, and the record says so.

Sampling is the rollout's, not the harness's: a policy-gradient trainer needs the temperature it
computes log-probs at. What the harness asked for is recorded beside what was used.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from nemo_gym_prorl.llm.access import LLMAccess
from nemo_gym_prorl.llm.records import SamplingParams, TrajectoryTokens, TurnRecord
from nemo_gym_prorl.llm.tito import TokenSession
from nemo_gym_prorl.llm.toolcalls import tool_call_to_openai

ChatFinishReason = Literal["stop", "length", "tool_calls"]


class RecordingRefusal(ValueError):
    """A call the endpoint cannot answer as asked (the harness gets a 400 with this message)."""


class BudgetExhausted(RecordingRefusal):
    """The rollout's budget of model calls (or its context window) is spent."""


class ChatRequest(BaseModel):
    """The OpenAI chat-completions request fields the endpoint reads; others are recorded and
    ignored (a harness's `metadata`, `user`, ...). Sampling fields are requests, not orders."""

    model_config = ConfigDict(extra="allow")

    model: str | None = None
    messages: list[dict[str, Any]] = Field(min_length=1)
    tools: list[dict[str, Any]] | None = None
    stream: bool = False
    n: int = Field(1, ge=1)
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    temperature: float | None = None
    top_p: float | None = None
    stop: str | list[str] | None = None

    @field_validator("n")
    @classmethod
    def _one_choice(cls, n: int) -> int:
        if n != 1:
            raise ValueError("one choice per call (n=1): a trajectory records one continuation")
        return n

    @field_validator("stop")
    @classmethod
    def _no_stop(cls, stop: str | list[str] | None) -> str | list[str] | None:
        if stop:
            raise ValueError(
                "stop sequences are not supported: the policy's own end of turn ends a call, as in training"
            )
        return stop

    @property
    def token_limit(self) -> int | None:
        return self.max_completion_tokens or self.max_tokens


def message_text(content: Any) -> str:
    """A message's content as the text the chat template renders: a string, or OpenAI's list
    of text parts joined. Images and other parts cannot reach a text policy."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if (
                not isinstance(part, Mapping)
                or part.get("type") != "text"
                or not isinstance(part.get("text"), str)
            ):
                kind = part.get("type") if isinstance(part, Mapping) else type(part).__name__
                raise RecordingRefusal(f"only text content parts are supported, not {kind!r}")
            texts.append(part["text"])
        return "".join(texts)
    raise RecordingRefusal(
        f"message content must be a string or a list of text parts, not {type(content).__name__}"
    )


def _calls(message: Mapping[str, Any]) -> list[tuple[str, str, Any]]:
    calls = []
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except json.JSONDecodeError:
                pass
        calls.append((str(call.get("id")), str(function.get("name")), arguments))
    return calls


def comparable(message: Mapping[str, Any]) -> tuple[Any, ...]:
    """What identifies a message in a conversation: role, text, tool calls and the call it
    answers. Keys a client adds on the way back (`refusal: null`, `annotations`) do not count."""
    role = message.get("role")
    if role not in ("system", "user", "assistant", "tool", "developer"):
        raise RecordingRefusal(f"unknown message role {role!r}")
    return (role, message_text(message.get("content")), _calls(message), message.get("tool_call_id"))


def wire_message(message: Mapping[str, Any]) -> dict[str, Any]:
    """The message as the chat template gets it: text content, no client-only keys."""
    out: dict[str, Any] = {"role": message["role"], "content": message_text(message.get("content"))}
    for key in ("tool_calls", "tool_call_id", "name"):
        if message.get(key) is not None:
            out[key] = message[key]
    return out


class SegmentRecord(BaseModel):
    """One token sequence of a harness rollout and how many calls it merged."""

    index: int
    calls: int
    tokens: TrajectoryTokens


class CallRecord(BaseModel):
    """One model call as the harness made it and as it was answered."""

    segment: int
    merged: bool = Field(description="True: the call extended its segment's token sequence")
    messages: int = Field(description="messages the harness sent")
    new_messages: int = Field(description="messages rendered for this call")
    requested: dict[str, Any] = Field(
        default_factory=dict, description="sampling fields the harness asked for"
    )
    finish_reason: ChatFinishReason
    generated_tokens: int
    seconds: float


class HarnessRecord(BaseModel):
    """Everything a recording session produced: the token sequences, and every call."""

    trajectory_id: str
    segments: list[SegmentRecord]
    calls: list[CallRecord]

    @property
    def merged_share(self) -> float | None:
        """Of the calls after each segment's first, the share that extended their sequence: 1.0
        for a harness whose history only grows."""
        later = len(self.calls) - len(self.segments)
        if later <= 0:
            return None
        return sum(c.merged for c in self.calls) / later

    @property
    def turns(self) -> list[TurnRecord]:
        return [turn for segment in self.segments for turn in segment.tokens.turns]


class _Segment:
    def __init__(self, index: int, session: TokenSession, tools: list[dict[str, Any]] | None) -> None:
        self.index = index
        self.session = session
        self.tools = tools
        self.conversation: list[tuple[Any, ...]] = []  # comparable messages, replies included
        self.calls = 0


class RecordingSession:
    """One rollout's harness conversation (see the module docstring). Not thread-safe: calls are
    answered one at a time, in order, as a harness makes them."""

    def __init__(
        self,
        llm: LLMAccess,
        *,
        sampling: SamplingParams,
        trajectory_id: str | None = None,
        max_calls: int | None = None,
    ) -> None:
        self.llm = llm
        self.sampling = sampling
        self.trajectory_id = trajectory_id or uuid.uuid4().hex
        self.max_calls = max_calls
        self._segments: list[_Segment] = []
        self._calls: list[CallRecord] = []
        self._closed = False
        # The last call's messages and the reply to it: the conversation as the harness had it.
        self.conversation: list[dict[str, Any]] = []

    @property
    def calls(self) -> int:
        return len(self._calls)

    async def complete(self, request: ChatRequest) -> dict[str, Any]:
        """Answer one call: an OpenAI `chat.completion` object."""
        if self._closed:
            raise BudgetExhausted("this rollout has ended")
        if self.max_calls is not None and len(self._calls) >= self.max_calls:
            raise BudgetExhausted(f"the rollout's budget of {self.max_calls} model calls is spent")
        conversation = [comparable(m) for m in request.messages]
        segment, new = self._place(conversation, request.tools)
        merged = segment.calls > 0
        sampling = self.sampling
        if request.token_limit is not None and request.token_limit < sampling.max_tokens:
            sampling = sampling.model_copy(update={"max_tokens": request.token_limit})
        segment.session.sampling = sampling
        started = time.monotonic()
        if segment.session.finished:
            raise BudgetExhausted(f"the rollout's context window is full ({segment.session.trajectory_id})")
        turn = await segment.session.generate([wire_message(m) for m in request.messages[-new:]])
        reply = self._reply(turn, bool(request.tools))
        finish = reply_finish(turn)
        segment.conversation = [*conversation, comparable(reply)]
        self.conversation = [*(wire_message(m) for m in request.messages), reply]
        segment.calls += 1
        requested = {
            k: getattr(request, k) for k in ("temperature", "top_p") if getattr(request, k) is not None
        }
        self._calls.append(
            CallRecord(
                segment=segment.index,
                merged=merged,
                messages=len(request.messages),
                new_messages=new,
                requested=requested,
                finish_reason=finish,
                generated_tokens=len(turn.generation_token_ids),
                seconds=round(time.monotonic() - started, 3),
            )
        )
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request.model or self.llm.model or "policy",
            "choices": [{"index": 0, "message": reply, "finish_reason": finish, "logprobs": None}],
            "usage": {
                "prompt_tokens": len(turn.prompt_token_ids),
                "completion_tokens": len(turn.generation_token_ids),
                "total_tokens": len(turn.prompt_token_ids) + len(turn.generation_token_ids),
            },
        }

    def _place(
        self, conversation: list[tuple[Any, ...]], tools: list[dict[str, Any]] | None
    ) -> tuple[_Segment, int]:
        """The segment a call joins and how many of its messages are new."""
        current = self._segments[-1] if self._segments else None
        if (
            current is not None
            and current.tools == tools
            and len(conversation) > len(current.conversation)
            and conversation[: len(current.conversation)] == current.conversation
            and not current.session.finished
        ):
            return current, len(conversation) - len(current.conversation)
        if current is not None:
            current.session.close()
        index = len(self._segments)
        session = TokenSession(
            self.llm.pool,
            self.llm.dialect,
            model=self.llm.model or "policy",
            sampling=self.sampling,
            tools=tools,
            trajectory_id=f"{self.trajectory_id}-s{index}",
            max_model_len=self.llm.max_model_len,
            parse_tool_calls=bool(tools),
        )
        segment = _Segment(index, session, tools)
        self._segments.append(segment)
        return segment, len(conversation)

    @staticmethod
    def _reply(turn: TurnRecord, structured: bool) -> dict[str, Any]:
        if not structured:
            return {"role": "assistant", "content": turn.text}
        reply: dict[str, Any] = {"role": "assistant", "content": turn.content or None}
        if turn.tool_calls:
            reply["tool_calls"] = [tool_call_to_openai(call) for call in turn.tool_calls]
        return reply

    def close(self) -> None:
        """End the rollout's conversation: later calls are refused; sticky bindings released."""
        self._closed = True
        for segment in self._segments:
            segment.session.close()

    def record(self) -> HarnessRecord:
        return HarnessRecord(
            trajectory_id=self.trajectory_id,
            segments=[
                SegmentRecord(index=s.index, calls=s.calls, tokens=s.session.record()) for s in self._segments
            ],
            calls=list(self._calls),
        )


def reply_finish(turn: TurnRecord) -> ChatFinishReason:
    if turn.tool_calls:
        return "tool_calls"
    return "length" if turn.finish_reason == "length" else "stop"
