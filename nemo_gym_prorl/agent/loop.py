# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The multi-turn agent loop: model turn -> tool calls -> observations, until the task ends.

The loop owns no resources: the token session (one trajectory's exact tokens and its backend
route) and the tools (one sandbox's shell, kernel and editor) are handed in and closed by
whoever opened them, so a pipeline stage can cancel or time out a rollout at any await and
still release everything.

A trajectory ends, with the reason recorded, when the model
- calls the finish tool (`submit`) -> `submitted`,
- answers without calling a tool -> `answered` (math answers in `\\boxed{}` end this way),
- is cut by `max_tokens` (finish reason `length`) with no complete tool call -> `length`: a
  truncated sample, never `answered`,
- runs out of turns, generated-token budget or time -> `max_turns` / `token_budget` / `time_budget`,
- fills its context window -> `context_length` (a normal end, not an error),
- or its inference fails for good -> `infrastructure_error` (backends gone: mask the sample) or
  `model_error` (the request itself was bad).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from nemo_gym_prorl.latency import TURN
from nemo_gym_prorl.llm.errors import InferenceError
from nemo_gym_prorl.llm.records import ChatMessage, ToolCall, TrajectoryTokens, TurnRecord
from nemo_gym_prorl.llm.slot_wait import SlotWaitClock, listen
from nemo_gym_prorl.llm.tito import TokenSession

FINISH_TOOL = "submit"

StopReason = Literal[
    "submitted",
    "answered",
    "length",
    "max_turns",
    "token_budget",
    "time_budget",
    "context_length",
    "infrastructure_error",
    "model_error",
]


class Observation(Protocol):
    text: str
    is_error: bool


class ToolExecutor(Protocol):
    """What the loop needs from a tool layer (`nemo_gym_prorl.tools.ToolBox` is one)."""

    def specs(self) -> list[dict[str, Any]]: ...

    async def call(self, name: str, arguments: str | Mapping[str, Any] | None) -> Observation: ...


class AgentLimits(BaseModel):
    model_config = ConfigDict(extra="forbid")

    max_turns: int = Field(16, ge=1, description="Model calls per trajectory.")
    max_generated_tokens: int | None = Field(
        None, ge=1, description="Tokens the model may generate over the whole trajectory."
    )
    max_time_s: float | None = Field(
        None,
        gt=0,
        description="Time budget of the loop: wall-clock time less the time its model calls waited "
        "for a free backend slot (the service's backpressure, not the rollout's work).",
    )


class ToolStep(BaseModel):
    """One tool call the model made and what it got back."""

    turn: int
    call_id: str
    name: str | None
    arguments: dict[str, Any] | None = Field(None, description="None when the call could not be parsed")
    observation: str
    is_error: bool
    duration_s: float

    @classmethod
    def answered(cls, turn: int, call: ToolCall, observation: Observation, duration_s: float) -> ToolStep:
        """The step of a well-formed call, with the tool's answer."""
        return cls(
            turn=turn,
            call_id=call.id,
            name=call.name,
            arguments=call.arguments,
            observation=observation.text,
            is_error=observation.is_error,
            duration_s=duration_s,
        )


class AgentTrajectory(BaseModel):
    """Everything one rollout's RUN stage produced."""

    tokens: TrajectoryTokens
    steps: list[ToolStep]
    stop_reason: StopReason
    final_answer: str | None = Field(None, description="the submitted answer, or the last prose reply")
    messages: list[dict[str, Any]] = Field(description="the conversation as sent to the model")
    num_turns: int
    generated_tokens: int
    duration_s: float
    model_wait_s: float = Field(
        0.0, description="of `duration_s`, the time its model calls waited for a free backend slot"
    )
    harness: dict[str, Any] | None = Field(
        None, description="a harness's rollout: its name and exit status, its calls and token segments"
    )
    reply_positions: list[int] | None = Field(
        None,
        description="the index in `messages` of each turn's reply; None: the assistant messages, in order "
        "(a harness may resend earlier replies as text, which no turn of this sequence sampled)",
    )

    @property
    def infrastructure_failed(self) -> bool:
        return self.stop_reason == "infrastructure_error"


async def run_agent(
    session: TokenSession,
    tools: ToolExecutor,
    initial_messages: Sequence[ChatMessage | Mapping[str, Any]],
    limits: AgentLimits | None = None,
) -> AgentTrajectory:
    """Drive one trajectory to its end. Never raises for the model's or the tools' mistakes;
    only cancellation propagates."""
    limits = limits or AgentLimits()
    started = time.monotonic()
    steps: list[ToolStep] = []
    pending: list[ChatMessage | Mapping[str, Any]] = list(initial_messages)
    final_answer: str | None = None
    generated = 0
    stop: StopReason = "max_turns"
    clock = SlotWaitClock()

    def time_left() -> float | None:
        if limits.max_time_s is None:
            return None
        return limits.max_time_s - (time.monotonic() - started - clock.waited_s())

    turn_started: float | None = None
    for _ in range(limits.max_turns):
        if turn_started is not None:  # the previous turn: its model call and its tools
            TURN.observe(time.monotonic() - turn_started)
        turn_started = time.monotonic()
        remaining = time_left()
        if remaining is not None and remaining <= 0:
            stop = "time_budget"
            break
        try:
            with listen(clock):
                async with asyncio.timeout(remaining) as timer:
                    with clock.pausing(timer, time_left):
                        turn = await session.generate(pending)
        except TimeoutError:
            stop = "time_budget"
            break
        except InferenceError as exc:
            stop = "infrastructure_error" if exc.infrastructure else "model_error"
            break
        generated += len(turn.generation_token_ids)

        if turn.context_exhausted:
            final_answer = turn.content or None
            stop = "context_length"
            break
        if turn.finish_reason == "length" and not turn.tool_calls:
            final_answer = turn.content or None
            stop = "length"
            break
        if not turn.tool_calls and not turn.tool_call_errors:
            final_answer = turn.content
            stop = "answered"
            break

        pending, submitted = await _run_tools(turn, tools, steps)
        if submitted is not None:
            final_answer = submitted
            stop = "submitted"
            break
        if limits.max_generated_tokens is not None and generated >= limits.max_generated_tokens:
            stop = "token_budget"
            break

    if turn_started is not None:
        TURN.observe(time.monotonic() - turn_started)
    return AgentTrajectory(
        tokens=session.record(),
        steps=steps,
        stop_reason=stop,
        final_answer=final_answer,
        messages=list(session.messages),
        num_turns=len(session.turns),
        generated_tokens=generated,
        duration_s=time.monotonic() - started,
        model_wait_s=clock.waited_s(),
    )


async def _run_tools(
    turn: TurnRecord, tools: ToolExecutor, steps: list[ToolStep]
) -> tuple[list[ChatMessage], str | None]:
    """Answer every call of a turn, in order; returns the tool messages and a submitted answer.

    Calls run one after another, not concurrently: they share one shell and one workspace,
    and a model that writes a file then runs it expects that order."""
    messages: list[ChatMessage] = []
    submitted: str | None = None
    for error in turn.tool_call_errors:
        steps.append(
            ToolStep(
                turn=turn.turn,
                call_id=error.id,
                name=error.name,
                observation=error.observation(),
                is_error=True,
                duration_s=0.0,
            )
        )
        messages.append(error.to_tool_message())
    for call in turn.tool_calls:
        observation, duration = await _call(tools, call)
        steps.append(ToolStep.answered(turn.turn, call, observation, duration))
        messages.append(
            ChatMessage(role="tool", content=observation.text, tool_call_id=call.id, name=call.name)
        )
        if call.name == FINISH_TOOL and not observation.is_error and submitted is None:
            submitted = str(call.arguments.get("answer", ""))
    return messages, submitted


async def _call(tools: ToolExecutor, call: ToolCall) -> tuple[Observation, float]:
    started = time.monotonic()
    observation = await tools.call(call.name, call.arguments)
    return observation, time.monotonic() - started
