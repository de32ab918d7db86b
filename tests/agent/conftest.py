"""A scripted model for agent-loop unit tests: replies with fixed texts, token-exactly."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from nemo_gym_prorl.llm.dialects.base import Dialect, Generation, TurnContext
from nemo_gym_prorl.llm.errors import RetriesExhaustedError
from nemo_gym_prorl.llm.pool import LLMBackendPool


class ScriptedDialect(Dialect):
    """Turn i answers `replies[i]`; the prompt is the history plus one token per new message.
    A reply that is an exception instance is raised instead (e.g. a dead backend)."""

    name = "scripted"

    def __init__(self, replies: list[str | Exception], *, exhaust_at: int | None = None) -> None:
        self.replies = replies
        self.exhaust_at = exhaust_at
        self.seen: list[TurnContext] = []

    async def generate(self, ctx: TurnContext) -> Generation:
        self.seen.append(ctx)
        prompt = [*ctx.history_ids, *[1000 + ctx.turn] * len(ctx.new_messages)]
        if ctx.turn == self.exhaust_at:
            return Generation.exhausted(prompt)
        reply = self.replies[ctx.turn]
        if isinstance(reply, Exception):
            raise reply
        ids = [ord(c) for c in reply] or [0]
        return Generation(
            prompt_token_ids=prompt,
            generation_token_ids=ids,
            generation_log_probs=[-0.5] * len(ids),
            finish_reason="stop",
            text=reply,
            backend="scripted",
        )


def dead_backend() -> RetriesExhaustedError:
    return RetriesExhaustedError("all 3 attempts failed: connection refused", errors=[])


@pytest.fixture
async def pool() -> AsyncIterator[LLMBackendPool]:
    async with LLMBackendPool() as p:
        yield p


@pytest.fixture
def scripted() -> type[ScriptedDialect]:
    return ScriptedDialect


@pytest.fixture
def dead() -> RetriesExhaustedError:
    return dead_backend()
