# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Token-in/token-out sessions: one trajectory's exact token history.

    async with LLMBackendPool(PoolConfig(backends=[url])) as pool:
        session = TokenSession(pool, VLLMCompletionsDialect(), model="policy", tools=tools)
        turn = await session.generate([system_msg, user_msg])
        while turn.tool_calls and not session.finished:
            results = [run(call) for call in turn.tool_calls]           # tool messages
            turn = await session.generate(results)
        record = session.record()                                      # TrajectoryTokens
        session.close()

Invariants the session enforces (NeMo RL asserts the first one and crashes otherwise):
- every turn's `prompt_token_ids` starts with the previous turn's prompt + generated ids;
- log-probs are finite and aligned with the generated ids;
- a full context window ends the trajectory with finish reason `length`, not an error;
- an error the pool could not recover from is recorded as `failure` (infrastructure or not)
  and re-raised; the session refuses further turns, so nothing hangs on a dead trajectory.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from nemo_gym_prorl.llm.dialects.base import Dialect, Generation, TurnContext
from nemo_gym_prorl.llm.dialects.structured import TrajectoryConstraint
from nemo_gym_prorl.llm.errors import InferenceError, NonContiguousError
from nemo_gym_prorl.llm.pool import LLMBackendPool, Route
from nemo_gym_prorl.llm.records import (
    ChatMessage,
    FinishReason,
    SamplingParams,
    TrajectoryFailure,
    TrajectoryTokens,
    TurnRecord,
)
from nemo_gym_prorl.llm.toolcalls import ParsedCalls, parse_server_tool_calls, parse_tool_calls


class SessionClosedError(InferenceError):
    """A turn was requested after the trajectory ended (failure, full context, or close())."""

    infrastructure = False


def _wire(message: ChatMessage | Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(message, ChatMessage):
        return message.to_wire()
    return ChatMessage.model_validate(dict(message)).to_wire()


class TokenSession:
    """Owns one trajectory's messages, token history, per-turn records and route."""

    def __init__(
        self,
        pool: LLMBackendPool,
        dialect: Dialect,
        *,
        model: str,
        sampling: SamplingParams | None = None,
        tools: list[dict[str, Any]] | None = None,
        trajectory_id: str | None = None,
        max_model_len: int | None = None,
        parse_tool_calls: bool = True,
        constraint: TrajectoryConstraint | None = None,
    ) -> None:
        self.pool = pool
        self.dialect = dialect
        self.model = model
        self.sampling = sampling or SamplingParams()
        self.tools = tools or None
        self.trajectory_id = trajectory_id or uuid.uuid4().hex
        self.max_model_len = max_model_len
        self.parse_tool_calls = parse_tool_calls
        # The tools and answer format a dialect with constrained decoding builds on (it is
        # ignored by a dialect without that option).
        self.constraint = constraint
        self.route = Route(key=self.trajectory_id)
        self.turns: list[TurnRecord] = []
        self.messages: list[dict[str, Any]] = []
        self.failure: TrajectoryFailure | None = None
        self.context_exhausted = False
        self._closed = False

    # --- state --------------------------------------------------------------------------------

    @property
    def token_ids(self) -> list[int]:
        """The whole trajectory so far: last prompt + last generation."""
        return self.turns[-1].full_token_ids if self.turns else []

    @property
    def finished(self) -> bool:
        """No further turn is possible (failure, full context window, or closed)."""
        return self._closed or self.failure is not None or self.context_exhausted

    @property
    def finish_reason(self) -> FinishReason | None:
        return self.turns[-1].finish_reason if self.turns else None

    # --- turns --------------------------------------------------------------------------------

    async def generate(
        self,
        new_messages: Sequence[ChatMessage | Mapping[str, Any]],
        *,
        rendered_ids: list[int] | None = None,
    ) -> TurnRecord:
        """Append `new_messages` (the first call: system + user; later: tool results, user
        turns) and sample the next assistant turn.

        `rendered_ids`: `new_messages` are the whole conversation, whose rendering (`render`)
        extends the history token for token; it is the prompt as is (a harness that re-sent its
        history in words of its own that still tokenize to the same sequence)."""
        if self.finished:
            reason = (
                self.failure.message
                if self.failure
                else "context window full"
                if self.context_exhausted
                else "closed"
            )
            raise SessionClosedError(f"trajectory {self.trajectory_id} has ended ({reason})")
        wire = [_wire(m) for m in new_messages]
        if not wire and not self.turns:
            raise ValueError("the first turn needs at least one message")
        turn_index = len(self.turns)
        self.route.turn = turn_index
        history = self.token_ids
        # The turn runs on the policy version current at its start, to its end.
        policy = await self.pool.policy.acquire()
        try:
            return await self._turn(
                wire, turn_index, history, policy.model or self.model, policy.version, rendered_ids
            )
        finally:
            self.pool.policy.release(policy)

    async def render(self, messages: Sequence[ChatMessage | Mapping[str, Any]]) -> list[int] | None:
        """The prompt ids `messages` (a whole conversation) render to on the backend, or None
        when the dialect does not render prompts itself (a server that renders them)."""
        render = getattr(self.dialect, "render", None)
        if render is None:
            return None
        ctx = self._context([_wire(m) for m in messages], len(self.turns), self.token_ids, self.model, None)
        ids: list[int] = await render(ctx, ctx.new_messages)
        return ids

    def _context(
        self,
        wire: list[dict[str, Any]],
        turn_index: int,
        history: list[int],
        model: str,
        rendered_ids: list[int] | None,
    ) -> TurnContext:
        return TurnContext(
            pool=self.pool,
            route=self.route,
            model=model,
            sampling=self.sampling,
            tools=self.tools,
            messages=self.messages,
            new_messages=wire,
            history_ids=history,
            last_generation_ids=self.turns[-1].generation_token_ids if self.turns else [],
            turn=turn_index,
            max_model_len=self.max_model_len,
            constraint=self.constraint,
            rendered_ids=rendered_ids,
        )

    async def _turn(
        self,
        wire: list[dict[str, Any]],
        turn_index: int,
        history: list[int],
        model: str,
        policy_version: int | None,
        rendered_ids: list[int] | None = None,
    ) -> TurnRecord:
        ctx = self._context(wire, turn_index, history, model, rendered_ids)
        started = time.monotonic()
        try:
            generation = await self.dialect.generate(ctx)
            if generation.prompt_token_ids[: len(history)] != history:
                raise NonContiguousError(
                    f"turn {turn_index}: the prompt does not start with the trajectory's "
                    f"{len(history)} history tokens (dialect {self.dialect.name}, backend {generation.backend})"
                )
        except InferenceError as exc:
            self.failure = TrajectoryFailure(
                kind=type(exc).__name__,
                message=exc.message,
                infrastructure=exc.infrastructure,
                turn=turn_index,
            )
            raise
        if generation.max_model_len and self.max_model_len is None:
            self.max_model_len = generation.max_model_len
        record = self._record(turn_index, generation, time.monotonic() - started, policy_version)
        self.turns.append(record)
        if rendered_ids is not None:  # `wire` was the whole conversation
            self.messages.clear()
        self.messages.extend(wire)
        self.messages.append(record.assistant_message().to_wire())
        self.context_exhausted = generation.context_exhausted
        return record

    def _record(
        self, turn: int, generation: Generation, latency_s: float, policy_version: int | None
    ) -> TurnRecord:
        if not self.parse_tool_calls:
            parsed = ParsedCalls(content=generation.text)
        elif generation.server_tool_calls:
            parsed = parse_server_tool_calls(generation.server_tool_calls, turn=turn)
            parsed.content = generation.text.strip()
        else:
            specs = self.tools or (self.constraint.tools if self.constraint else None)
            parsed = parse_tool_calls(
                generation.text, self.dialect.tool_call_format, turn=turn, tool_specs=specs
            )
        return TurnRecord(
            turn=turn,
            prompt_token_ids=generation.prompt_token_ids,
            generation_token_ids=generation.generation_token_ids,
            generation_log_probs=generation.generation_log_probs,
            finish_reason=generation.finish_reason,
            context_exhausted=generation.context_exhausted,
            text=generation.text,
            content=parsed.content,
            tool_calls=parsed.calls,
            tool_call_errors=parsed.errors,
            server_tool_calls=generation.server_tool_calls,
            backend=generation.backend,
            dialect=self.dialect.name,
            latency_s=latency_s,
            decoding=generation.decoding.model_dump() if generation.decoding else None,
            policy_version=policy_version,
        )

    # --- end ----------------------------------------------------------------------------------

    def close(self) -> None:
        """End the trajectory: release its sticky binding in the pool. Idempotent."""
        if not self._closed:
            self._closed = True
            self.pool.end_trajectory(self.route)

    def record(self) -> TrajectoryTokens:
        return TrajectoryTokens(
            trajectory_id=self.trajectory_id,
            dialect=self.dialect.name,
            turns=list(self.turns),
            reroutes=list(self.route.reroutes),
            finish_reason=self.finish_reason,
            context_exhausted=self.context_exhausted,
            failure=self.failure,
            http_attempts=self.route.attempts,
            http_retries=self.route.retried,
            policy_versions=list(dict.fromkeys(t.policy_version for t in self.turns)),
        )
