# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Typed records of the token-in/token-out layer (pydantic v2).

Token ids are the source of truth: a `TurnRecord` holds exactly the ids the policy saw and
sampled; its `text` is the server's detokenization of `generation_token_ids`.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from nemo_gym_prorl.llm.pool import Reroute

Role = Literal["system", "user", "assistant", "tool", "developer"]

# Why a turn ended. `length`: max_tokens reached or the context window is full (then
# `context_exhausted` is True); `stop`: the model ended its message; `tool_calls`: the server
# parsed tool calls and said so; `abort`: the server aborted the request.
FinishReason = Literal["stop", "length", "tool_calls", "abort"]


class ChatMessage(BaseModel):
    """An OpenAI-style chat message. Extra keys pass through to the server untouched."""

    model_config = ConfigDict(extra="allow")

    role: Role
    content: str | None = ""
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    name: str | None = None

    def to_wire(self) -> dict[str, Any]:
        """The JSON the server gets. Content stays a string: chat templates concatenate it,
        and an empty tool output must render as empty, not fail on None."""
        data = self.model_dump(exclude_none=True)
        data["content"] = self.content or ""
        return data


class SamplingParams(BaseModel):
    """What the trainer controls. NeMo RL pins (temperature, top_p), so both are explicit."""

    temperature: float = Field(1.0, ge=0)
    top_p: float = Field(1.0, gt=0, le=1)
    max_tokens: int = Field(1024, ge=1, description="per turn; clamped to what the context has left")
    seed: int | None = None


class ToolCall(BaseModel):
    """A well-formed tool call, from generated text (hermes) or from the server's parser."""

    id: str
    name: str
    arguments: dict[str, Any]
    raw: str = Field("", description="the exact text or JSON it was parsed from")


class ToolCallError(BaseModel):
    """A tool call the model tried to make but got wrong. It is not an exception: the agent
    answers it with `observation()` as the tool message, so the model can correct itself."""

    id: str
    raw: str
    error: str
    name: str | None = None

    def observation(self) -> str:
        return f"Error: could not parse this tool call ({self.error}). Raw text: {self.raw[:500]}"

    def to_tool_message(self) -> ChatMessage:
        return ChatMessage(role="tool", content=self.observation(), tool_call_id=self.id, name=self.name)


class TurnRecord(BaseModel):
    """One model call of a trajectory, in training form (NeMo Gym's three token fields)."""

    turn: int = Field(ge=0)
    prompt_token_ids: list[int] = Field(description="the whole prompt: history + new messages")
    generation_token_ids: list[int]
    generation_log_probs: list[float]
    finish_reason: FinishReason
    context_exhausted: bool = False
    text: str = Field(description="the server's detokenization of generation_token_ids")
    content: str = Field(description="text outside tool-call markup (the assistant's prose)")
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_errors: list[ToolCallError] = Field(default_factory=list)
    server_tool_calls: list[dict[str, Any]] | None = Field(
        None, description="tool calls exactly as the server's parser returned them, if it did"
    )
    backend: str | None = None
    dialect: str
    latency_s: float = 0.0
    decoding: dict[str, Any] | None = Field(
        None,
        description="the decoding constraint this turn was sampled under (its log-probs are then "
        "from the constrained distribution); None: unconstrained",
    )
    policy_version: int | None = Field(
        None, description="the published policy version that sampled this turn; None: the base model"
    )

    @model_validator(mode="after")
    def _aligned(self) -> TurnRecord:
        if len(self.generation_token_ids) != len(self.generation_log_probs):
            raise ValueError(
                f"{len(self.generation_token_ids)} generated ids but {len(self.generation_log_probs)} log-probs"
            )
        return self

    @field_validator("generation_log_probs")
    @classmethod
    def _finite(cls, values: list[float]) -> list[float]:
        # NeMo RL trains on these: a NaN would poison the loss. -inf is legal for a token that
        # was impossible under the policy, but vLLM never samples those, so reject it too.
        bad = [i for i, v in enumerate(values) if not math.isfinite(v)]
        if bad:
            raise ValueError(f"non-finite log-probs at positions {bad[:5]}")
        return values

    @property
    def full_token_ids(self) -> list[int]:
        return [*self.prompt_token_ids, *self.generation_token_ids]

    def assistant_message(self) -> ChatMessage:
        """The assistant message this turn adds to the conversation, with the token fields
        NeMo RL's server splices on the next turn."""
        extra: dict[str, Any] = {
            "prompt_token_ids": self.prompt_token_ids,
            "generation_token_ids": self.generation_token_ids,
            "generation_log_probs": self.generation_log_probs,
        }
        if self.server_tool_calls:
            extra["tool_calls"] = self.server_tool_calls
        return ChatMessage(role="assistant", content=self.text, **extra)


class TrajectoryFailure(BaseModel):
    """Why a trajectory could not continue. `infrastructure=True` maps to `mask_sample`."""

    kind: str = Field(description="the error class, e.g. RetriesExhaustedError")
    message: str
    infrastructure: bool
    turn: int


class TrajectoryTokens(BaseModel):
    """Everything a session produced, for the agent's result and the training record."""

    trajectory_id: str
    dialect: str
    turns: list[TurnRecord]
    reroutes: list[Reroute]
    finish_reason: FinishReason | None
    context_exhausted: bool
    failure: TrajectoryFailure | None
    http_attempts: int
    http_retries: int
    policy_versions: list[int | None] = Field(
        default_factory=list, description="the distinct policy versions of its turns, in order"
    )
