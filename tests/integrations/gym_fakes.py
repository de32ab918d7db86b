"""Test doubles for the Gym agent's unit tests: a scripted model dialect (token-exact, no server)
and an in-memory resources server speaking the prorl_* routes (seed, tools, verify, close)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nemo_gym_prorl.integrations.gym_agent import ResourcesReply, ResourcesUnavailableError
from nemo_gym_prorl.llm.dialects.base import Dialect, Generation, TurnContext


class ScriptedDialect(Dialect):
    """Turn i answers `replies[i]` (an exception instance is raised instead). The prompt is the
    history plus a fixed token per new message, so prompts are deterministic and contiguous."""

    name = "scripted"

    def __init__(self, replies: list[str | Exception]) -> None:
        self.replies = replies
        self.calls = 0

    async def generate(self, ctx: TurnContext) -> Generation:
        self.calls += 1
        first = [7, 7, len(ctx.new_messages)] if ctx.turn == 0 else []
        prompt = [*ctx.history_ids, *first, *[100 + ctx.turn] * len(ctx.new_messages)]
        reply = self.replies[min(ctx.turn, len(self.replies) - 1)]
        if isinstance(reply, Exception):
            raise reply
        ids = [ord(c) for c in reply] or [0]
        return Generation(
            prompt_token_ids=prompt,
            generation_token_ids=ids,
            generation_log_probs=[-0.25] * len(ids),
            finish_reason="stop",
            text=reply,
            backend="scripted",
        )


class FakeResources:
    """An in-memory resources server. `fail` maps a path to an HTTP status (or 'down')."""

    def __init__(self, reward: float = 1.0, fail: Mapping[str, int | str] | None = None) -> None:
        self.reward = reward
        self.fail = dict(fail or {})
        self.calls: list[tuple[str, str, Any, dict[str, str]]] = []
        self.open_sessions: set[str] = set()
        self._n = 0

    async def post(self, server: str, path: str, body: Any, cookies: Mapping[str, str]) -> ResourcesReply:
        self.calls.append((server, path, body, dict(cookies)))
        failure = self.fail.get(path)
        if failure == "down":
            raise ResourcesUnavailableError(f"{server}{path}: connection refused")
        if isinstance(failure, int):
            return ResourcesReply(failure, {"detail": "boom"}, dict(cookies))
        sid = cookies.get("sid")
        if path == "/seed_session":
            self._n += 1
            sid = f"s{self._n}"
            self.open_sessions.add(sid)
            return ResourcesReply(200, {}, {"sid": sid})
        if path == "/verify":
            self.open_sessions.discard(sid or "")
            return ResourcesReply(
                200,
                {"reward": self.reward, "reward_components": {"correct": self.reward}, "resolved": self.reward >= 1,
                 "mask_sample": False, "instance_config": {"mask_sample": False}, "reason": "ok",
                 "responses_create_params": body["responses_create_params"], "response": body["response"]},
                dict(cookies),
            )  # fmt: skip
        if path == "/close_session":
            self.open_sessions.discard(sid or "")
            return ResourcesReply(200, {"closed": True}, dict(cookies))
        if sid not in self.open_sessions:
            return ResourcesReply(200, {"text": "No session", "is_error": True}, dict(cookies))
        return ResourcesReply(
            200, {"text": f"ran {path[1:]} with {body}", "is_error": False, "metadata": {}}, dict(cookies)
        )
