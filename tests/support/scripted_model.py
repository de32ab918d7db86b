# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""A scripted model dialect for unit tests (never a default, never a demo): turn i answers
`replies[i]` (the last reply repeats; an exception instance is raised instead). The prompt is
the history plus one fixed token per new message, so prompts are deterministic and contiguous."""

from __future__ import annotations

from nemo_gym_prorl.llm.dialects.base import Dialect, Generation, TurnContext


class ScriptedDialect(Dialect):
    name = "scripted"

    def __init__(
        self,
        replies: list[str | Exception],
        *,
        exhaust_at: int | None = None,
        truncate_at: int | None = None,
    ) -> None:
        self.replies = replies
        self.exhaust_at = exhaust_at  # the turn at which the context window is full
        self.truncate_at = truncate_at  # the turn cut by max_tokens (finish reason `length`)
        self.seen: list[TurnContext] = []

    @property
    def calls(self) -> int:
        return len(self.seen)

    async def generate(self, ctx: TurnContext) -> Generation:
        self.seen.append(ctx)
        prompt = [*ctx.history_ids, *[1000 + ctx.turn] * len(ctx.new_messages)]
        if ctx.turn == self.exhaust_at:
            return Generation.exhausted(prompt)
        reply = self.replies[min(ctx.turn, len(self.replies) - 1)]
        if isinstance(reply, Exception):
            raise reply
        ids = [ord(c) for c in reply] or [0]
        return Generation(
            prompt_token_ids=prompt,
            generation_token_ids=ids,
            generation_log_probs=[-0.5] * len(ids),
            finish_reason="length" if ctx.turn == self.truncate_at else "stop",
            text=reply,
            backend="scripted",
        )
