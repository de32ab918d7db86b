# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Test doubles for the Gym agent's unit tests: the scripted model (tests/support/scripted_model.py),
an in-memory resources server speaking the prorl_* routes (seed, tools, verify, close), and the
Gym agent runtime wired to both (`scripted_runtime`)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

from nemo_gym.rollout_correlation import current_rollout_id

from nemo_gym_prorl.integrations.gym.config import ProRLAgentSettings, ResolvedModelAccess
from nemo_gym_prorl.integrations.gym.runtime import ProRLGymRuntime
from nemo_gym_prorl.integrations.gym.transport import ResourcesReply, ResourcesUnavailableError
from nemo_gym_prorl.llm.access import LLMConfig
from support.scripted_model import ScriptedDialect

# A math rollout the scripted model plays: one IPython call computing 1+1, then the boxed answer.
TOOL = {"type": "function", "name": "ipython", "description": "run python", "strict": False,
        "parameters": {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]}}  # fmt: skip
CALL = '<tool_call>\n{"name": "ipython", "arguments": {"code": "1+1"}}\n</tool_call>'
ANSWER = "So the answer is \\boxed{2}."


class FakeResources:
    """An in-memory resources server. `fail` maps a path to an HTTP status (or 'down').

    `rollout_ids` holds (path, Gym's current rollout id) for every call, as Gym's client would
    prefix it; a tool's reply names the rollout too, so a caller on another node can see it.
    `/check_instance` (the check at submit, before any rollout) takes every row and is kept apart,
    in `checks`: `calls` and `rollout_ids` are the rollouts' own calls."""

    def __init__(self, reward: float = 1.0, fail: Mapping[str, int | str] | None = None) -> None:
        self.reward = reward
        self.fail = dict(fail or {})
        self.calls: list[tuple[str, str, Any, dict[str, str]]] = []
        self.rollout_ids: list[tuple[str, str | None]] = []
        self.open_sessions: set[str] = set()
        self.checks: list[tuple[str, Any]] = []
        self._n = 0

    async def post(self, server: str, path: str, body: Any, cookies: Mapping[str, str]) -> ResourcesReply:
        if path == "/check_instance":
            return self._check(server, body)
        self.calls.append((server, path, body, dict(cookies)))
        rollout_id = current_rollout_id()
        self.rollout_ids.append((path, rollout_id))
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
        if path == "/exec":  # a harness's command: `echo` answered as a shell would, others named
            if sid not in self.open_sessions:
                return ResourcesReply(404, {"detail": "no session"}, dict(cookies))
            command = str(body["command"])
            out = command.removeprefix("echo ") if command.startswith("echo ") else f"ran {command}"
            result = {
                "exit_code": 0,
                "stdout": out + "\n",
                "stderr": "",
                "timed_out": False,
                "duration_s": 0.0,
            }
            return ResourcesReply(200, result, dict(cookies))
        if sid not in self.open_sessions:
            return ResourcesReply(200, {"text": "No session", "is_error": True}, dict(cookies))
        return ResourcesReply(
            200,
            {
                "text": f"ran {path[1:]} with {body} in rollout {rollout_id}",
                "is_error": False,
                "metadata": {},
            },
            dict(cookies),
        )

    def _check(self, server: str, body: Any) -> ResourcesReply:
        self.checks.append((server, body))
        failure = self.fail.get("/check_instance")
        if failure == "down":
            raise ResourcesUnavailableError(f"{server}/check_instance: connection refused")
        if isinstance(failure, int):
            return ResourcesReply(failure, {"detail": "boom"}, {})
        return ResourcesReply(200, {"ok": True}, {})


def scripted_runtime(
    settings: ProRLAgentSettings,
    dialect: ScriptedDialect,
    resources: Callable[[], FakeResources],
    servers: Mapping[str, str] | None = None,
    **options: Any,
) -> ProRLGymRuntime:
    """The Gym agent runtime with `dialect` as its model (no backend is ever reached) and
    `resources()` as the client of every resources server in `servers` (default: prorl_math).
    The caller closes it."""
    access = ResolvedModelAccess(
        LLMConfig(backends=["http://127.0.0.1:9"], dialect="vllm", model="m", health_path=None), "backends"
    )
    runtime = ProRLGymRuntime(
        settings, dict(servers or {"prorl_math": "prorl_math"}), resources, access, **options
    )
    runtime.llm.dialect = dialect
    return runtime


async def session_opened(resources: FakeResources, timeout_s: float = 20.0) -> None:
    """Return once a rollout holds a session of `resources` (its INIT is done)."""
    async with asyncio.timeout(timeout_s):
        while not resources.open_sessions:  # noqa: ASYNC110 (the fake has no event to wait on)
            await asyncio.sleep(0.01)
