# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The dialect interface: how one turn's prompt reaches a server and how its answer is read.

A dialect is stateless apart from caches that depend only on the model and the tool list;
the per-trajectory state (token history, messages) lives in `TokenSession` and is handed in
as a `TurnContext`. One dialect instance serves many concurrent sessions.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import BaseModel, Field

from nemo_gym_prorl.llm.dialects.structured import DecodingRecord, TrajectoryConstraint
from nemo_gym_prorl.llm.pool import LLMBackendPool, Route
from nemo_gym_prorl.llm.records import FinishReason, SamplingParams
from nemo_gym_prorl.llm.toolcalls import ToolCallFormat


@dataclass(slots=True)
class TurnContext:
    """What a dialect needs to produce one turn (read-only for the dialect)."""

    pool: LLMBackendPool
    route: Route
    model: str
    sampling: SamplingParams
    tools: list[dict[str, Any]] | None
    messages: list[dict[str, Any]]  # the conversation so far, wire form; assistant turns carry token ids
    new_messages: list[dict[str, Any]]  # appended since the last generation
    history_ids: list[int]  # prompt + generation ids of the previous turn; empty on turn 0
    last_generation_ids: list[int]  # generation ids of the previous turn; empty on turn 0
    turn: int
    max_model_len: int | None  # known from config or learned from the server
    constraint: TrajectoryConstraint | None = None  # what constrained decoding may build on
    # The whole conversation already rendered, when it extends `history_ids` token for token (a
    # harness's call merged by token prefix): the prompt, as is.
    rendered_ids: list[int] | None = None


class Generation(BaseModel):
    """A dialect's answer for one turn (the session turns it into a `TurnRecord`)."""

    prompt_token_ids: list[int]
    generation_token_ids: list[int]
    generation_log_probs: list[float]
    finish_reason: FinishReason
    text: str
    server_tool_calls: list[dict[str, Any]] | None = None
    context_exhausted: bool = False
    backend: str | None = None
    max_model_len: int | None = Field(None, description="learned from the server, if it said")
    decoding: DecodingRecord | None = Field(None, description="the constraint the turn was sampled under")

    @classmethod
    def exhausted(cls, prompt_token_ids: list[int], max_model_len: int | None = None) -> Generation:
        """The context window is full: the turn ends with `length`, nothing generated."""
        return cls(
            prompt_token_ids=prompt_token_ids,
            generation_token_ids=[],
            generation_log_probs=[],
            finish_reason="length",
            text="",
            context_exhausted=True,
            max_model_len=max_model_len,
        )


class Dialect(ABC):
    """How to talk to one kind of server. Subclasses: `VLLMCompletionsDialect`, `NemoRLChatDialect`."""

    name: ClassVar[str]
    # The markup the model writes its tool calls in (parsed from the generated text).
    tool_call_format: ToolCallFormat = "hermes"

    @abstractmethod
    async def generate(self, ctx: TurnContext) -> Generation:
        """Send the next prompt (history + `ctx.new_messages`) and read the generation."""
