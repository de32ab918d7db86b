# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""A harness's model calls, answered by the policy and recorded token-exact.

An agent harness (mini-swe-agent, a tool-calling SDK) sends its whole conversation with every
chat-completions call. `RecordingSession` answers each call through a `TokenSession` on the
shared backend pool (sticky routing, the policy version current at the call, the rollout's
sampling) and decides, call by call, how the call joins the trajectory:

- **merged**: the call's prompt token ids begin with the previous call's prompt plus the ids it
  generated, so the whole conversation is one token sequence (the tokens the model did not
  generate are masked later). The endpoint finds that prefix two ways. When the call's messages
  are the previous call's plus the reply this session gave plus new ones, only the new messages
  are rendered (the chat template's suffix, the same rendering as the built-in loop) after the
  exact ids of everything before: the model keeps its own ids, never a re-tokenization. Otherwise
  the whole conversation is rendered on the backend, and if those ids still extend the previous
  call's prompt and generation token for token, whatever the messages' words, they are the prompt.
- **new segment**: anything else (a harness that dropped a reply, truncated, summarised or
  edited its history, or changed its tools). The call starts a new token sequence, and the
  record says so.

A call's `tools` reach the model the way the built-in agent's do (`LLMAccess.tool_prompt`):
`system` describes them in the conversation's system message in the hermes `<tool_call>`
convention (`llm.toolprompt`, the same text on every call, so the prompts still extend each
other), for chat templates that ignore tools; `template` hands them to the chat template. Either
way the reply's text is parsed into OpenAI `tool_calls` with the dialect's tool-call format,
and a dialect with constrained tool calling (`llm.constrained`) constrains the call's decoding
as it does the built-in agent's.

Sampling is the rollout's, not the harness's: a policy-gradient trainer needs the temperature it
computes log-probs at. What the harness asked for is recorded beside what was used.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from nemo_gym_prorl.llm.access import LLMAccess
from nemo_gym_prorl.llm.dialects import TrajectoryConstraint
from nemo_gym_prorl.llm.records import SamplingParams, TrajectoryTokens, TurnRecord
from nemo_gym_prorl.llm.tito import TokenSession
from nemo_gym_prorl.llm.toolcalls import tool_call_to_openai
from nemo_gym_prorl.llm.toolprompt import system_with_tools

ChatFinishReason = Literal["stop", "length", "tool_calls"]

# Told of every answered call before the harness gets the reply: the segment it joined, its
# position there and its turn (a token capture writes its record here, so the record exists
# before the harness can send the next call).
TurnObserver = Callable[[int, int, TurnRecord], Awaitable[None]]


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
    merged: bool = Field(
        description="True: the call's prompt extended the previous call's prompt and generation"
    )
    merged_by: Literal["messages", "tokens"] | None = Field(
        None,
        description="how the extension was found: the messages extended the previous call's (only the new "
        "ones rendered), or the whole conversation's rendering extended its ids",
    )
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
        """Of the calls after the rollout's first, the share whose prompt extended the previous
        call's token sequence: 1.0 for a harness whose history only grows, 0.0 when every call
        started over; None for a rollout of one call."""
        later = len(self.calls) - 1
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
        on_turn: TurnObserver | None = None,
    ) -> None:
        self.llm = llm
        self.sampling = sampling
        self.trajectory_id = trajectory_id or uuid.uuid4().hex
        self.max_calls = max_calls
        self.on_turn = on_turn
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
        sent = request
        request = self._presented(request)
        conversation = [comparable(m) for m in request.messages]
        segment, new, rendered = await self._place(request, conversation)
        merged = segment.calls > 0
        sampling = self.sampling
        if request.token_limit is not None and request.token_limit < sampling.max_tokens:
            sampling = sampling.model_copy(update={"max_tokens": request.token_limit})
        segment.session.sampling = sampling
        started = time.monotonic()
        if segment.session.finished:
            raise BudgetExhausted(f"the rollout's context window is full ({segment.session.trajectory_id})")
        turn = await segment.session.generate(
            [wire_message(m) for m in request.messages[-new:]], rendered_ids=rendered
        )
        if self.on_turn is not None:
            await self.on_turn(segment.index, segment.calls, turn)
        reply = self._reply(turn, bool(request.tools))
        finish = reply_finish(turn)
        segment.conversation = [*conversation, comparable(reply)]
        self.conversation = [*(wire_message(m) for m in sent.messages), reply]
        segment.calls += 1
        requested = {
            k: getattr(request, k) for k in ("temperature", "top_p") if getattr(request, k) is not None
        }
        self._calls.append(
            CallRecord(
                segment=segment.index,
                merged=merged,
                merged_by=None if not merged else "tokens" if rendered is not None else "messages",
                messages=len(sent.messages),
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

    def _presented(self, request: ChatRequest) -> ChatRequest:
        """The call as the model sees it. With `tool_prompt: system` and tools, its system
        message (a default one where it has none) describes them (`llm.toolprompt`: the text
        the built-in agent's first messages carry); the tools still decide how the reply is
        parsed and which segment the call joins, but do not reach the chat template."""
        if self.llm.tool_prompt != "system" or not request.tools:
            return request
        messages = list(request.messages)
        first = messages[0]
        if first.get("role") in ("system", "developer"):
            content = system_with_tools(message_text(first.get("content")), request.tools)
            messages[0] = {**first, "content": content}
        else:
            messages.insert(0, {"role": "system", "content": system_with_tools(None, request.tools)})
        return request.model_copy(update={"messages": messages})

    async def _place(
        self, request: ChatRequest, conversation: list[tuple[Any, ...]]
    ) -> tuple[_Segment, int, list[int] | None]:
        """The segment a call joins, how many of its messages are new, and, for a call that
        extends it only token for token, the whole conversation's prompt ids."""
        current = self._segments[-1] if self._segments else None
        if current is not None and current.tools == request.tools and not current.session.finished:
            if (
                len(conversation) > len(current.conversation)
                and conversation[: len(current.conversation)] == current.conversation
            ):
                return current, len(conversation) - len(current.conversation), None
            history = current.session.token_ids
            rendered = await current.session.render([wire_message(m) for m in request.messages])
            if rendered is not None and len(rendered) > len(history) and rendered[: len(history)] == history:
                return current, len(conversation), rendered
        if current is not None:
            current.session.close()
        index = len(self._segments)
        session = TokenSession(
            self.llm.pool,
            self.llm.dialect,
            model=self.llm.model or "policy",
            sampling=self.sampling,
            tools=request.tools if self.llm.tool_prompt == "template" else None,
            trajectory_id=f"{self.trajectory_id}-s{index}",
            max_model_len=self.llm.max_model_len,
            parse_tool_calls=bool(request.tools),
            # What a dialect with constrained tool calling (`llm.constrained`) builds on, as in
            # the built-in agent; the parser's specs too. Its turns count within the segment.
            constraint=TrajectoryConstraint(tools=request.tools) if request.tools else None,
        )
        segment = _Segment(index, session, request.tools)
        self._segments.append(segment)
        return segment, len(conversation), None

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
