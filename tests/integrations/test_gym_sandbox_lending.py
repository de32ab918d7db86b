# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""A ProRL resources server lends its session's sandbox to a Gym agent (`sandbox_access`).

With `sandbox_access_provider_ref` set, a real prorl_math session (over ASGI) answers
`/seed_session` with Gym's `SandboxAccess`; the agent's side resolves the named provider block
from its config, connects as Gym's `hermes_agent` does (`AsyncSandbox.connect`), and its
commands share files and processes with the session's own IPython tool. `/close_session` ends
the sandbox, and the borrowed handle then fails saying so. Gym's `single_agent_turn`
environment server drives the whole episode with an agent that borrows. Without the option
nothing changes: no access in the answer, the plain bubblewrap sandbox."""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from environment_servers.single_agent_turn.app import (
    SingleAgentTurnEnvironmentServer,
    SingleAgentTurnEnvironmentServerConfig,
)
from fastapi import FastAPI, Request, Response
from nemo_gym.base_environment_server import CleanupContext
from nemo_gym.base_resources_server import ResourcesSeedSessionResponse
from nemo_gym.base_responses_api_agent import (
    AgentCloseSessionRequest,
    AgentCloseSessionResponse,
    AgentSeedSessionRequest,
    AgentSeedSessionResponse,
)
from nemo_gym.sandbox import AsyncSandbox
from nemo_gym.sandbox.access import SandboxAccess
from nemo_gym.sandbox.config import resolve_provider_config
from nemo_gym.sandbox.providers.base import SandboxCreateError, SandboxStatus
from nemo_gym.sandbox.providers.registry import create_provider
from nemo_gym.single_agent_turn_types import SingleAgentTurnRequest
from omegaconf import OmegaConf
from pydantic import BaseModel
from support.environment_stack import GymReply

from nemo_gym_prorl.integrations.gym.resources_server import standalone_server_client
from nemo_gym_prorl.sandbox import SandboxSpec
from nemo_gym_prorl.sandbox.bubblewrap import BubblewrapSandbox
from nemo_gym_prorl.sandbox.persistent import PersistentBubblewrapSandbox
from resources_servers.prorl_math.app import ProRLMathConfig, ProRLMathServer

pytestmark = pytest.mark.bwrap

REF = "prorl_sandbox"
ROW = {
    "responses_create_params": {"input": [{"role": "user", "content": "6*7?"}]},
    "expected_answer": "42",
}


def _response(text: str) -> dict[str, Any]:
    """A Gym response whose one assistant message says `text`."""
    message = {"id": "m1", "type": "message", "role": "assistant", "status": "completed",
               "content": [{"type": "output_text", "text": text, "annotations": []}]}  # fmt: skip
    return {"id": "r", "created_at": 0, "model": "m", "object": "response", "parallel_tool_calls": False,
            "tool_choice": "auto", "tools": [], "output": [message]}  # fmt: skip


@asynccontextmanager
async def math_server(lend: bool) -> AsyncIterator[tuple[ProRLMathServer, httpx.AsyncClient, Path]]:
    # A short root: the IPython tool's Unix sockets live in the workspace.
    with tempfile.TemporaryDirectory(prefix="lend-", dir="/tmp") as root:
        config = ProRLMathConfig(
            host="127.0.0.1", port=0, entrypoint="app.py", name="prorl_math",
            sandbox=SandboxSpec(root_dir=Path(root)), sandbox_access_provider_ref=REF if lend else None,
        )  # fmt: skip
        server = ProRLMathServer(config=config, server_client=standalone_server_client())
        transport = httpx.ASGITransport(app=server.setup_webserver())
        async with httpx.AsyncClient(transport=transport, base_url="http://prorl_math") as http:
            try:
                yield server, http, Path(root)
            finally:
                await server.close_all()


async def borrow(access: SandboxAccess, root: Path) -> AsyncSandbox:
    """What a Gym sandboxed agent does with `sandbox_access` (see Gym's hermes_agent): resolve the
    named provider block in its global config, build the provider, connect."""
    global_config = {REF: {"bubblewrap": {"root_dir": str(root / "borrower")}}}
    provider = create_provider(resolve_provider_config(access.connection.provider_config_ref, global_config))
    return await AsyncSandbox.connect(access.connection.descriptor, provider=provider)


async def ipython(http: httpx.AsyncClient, code: str) -> dict[str, Any]:
    response = await http.post("/ipython", json={"code": code})
    assert response.status_code == 200, response.text
    return response.json()


async def test_an_agent_borrows_the_sessions_sandbox_beside_its_tools() -> None:
    async with math_server(lend=True) as (server, http, root):
        seeded = await http.post("/seed_session", json=ROW)
        assert seeded.status_code == 200, seeded.text
        access = SandboxAccess.model_validate(seeded.json()["sandbox_access"])
        assert access.connection.provider_config_ref == REF and access.workdir == "/workspace"
        (session,) = server._sessions.values()
        assert isinstance(session.sandbox, PersistentBubblewrapSandbox)

        borrowed = await borrow(access, root)
        wrote = await borrowed.exec("pwd; echo from-agent > shared.txt")
        assert (wrote.return_code, wrote.stdout) == (0, "/workspace\n")
        seen = await ipython(http, "print(open('shared.txt').read().strip())")
        assert "from-agent" in seen["text"] and not seen["is_error"], seen
        # And back: the kernel writes its pid to /tmp; the agent reads it and sees that process.
        await ipython(http, "import os\nopen('/tmp/k.txt', 'w').write(str(os.getpid()))")
        kernel = await borrowed.exec("cat /tmp/k.txt; echo; ps -eo pid= ")
        kernel_pid, *pids = kernel.stdout.split()
        assert kernel_pid in pids  # the kernel is a process of the very sandbox the agent is in
        assert await borrowed.status() == SandboxStatus.RUNNING

        closed = await http.post("/close_session")  # the session of the cookie, as the project's agent closes
        assert closed.status_code == 200
        assert await borrowed.status() == SandboxStatus.STOPPED
        with pytest.raises(RuntimeError, match="closed by its owner"):
            await borrowed.exec("true")
        await borrowed.disconnect()
        with pytest.raises(SandboxCreateError, match="not a live sandbox"):
            await borrow(access, root)


async def test_gyms_seed_protocol_lends_and_closes_by_resources_session_id() -> None:
    async with math_server(lend=True) as (server, http, root):
        seed = {
            "resources_session_id": "rs-1",
            "episode_id": {"rollout_id": "r1"},
            "task_id": {"taskset": "math", "task_id": "t1"},
            "task_data": {k: v for k, v in ROW.items() if k != "responses_create_params"},
        }
        seeded = await http.post("/seed_session", json=seed)
        assert seeded.status_code == 200, seeded.text
        answer = ResourcesSeedSessionResponse.model_validate(seeded.json())
        assert answer.resources_session_id == "rs-1" and answer.sandbox_access is not None
        again = ResourcesSeedSessionResponse.model_validate(
            (await http.post("/seed_session", json=seed)).json()
        )
        assert again.sandbox_access == answer.sandbox_access  # idempotent: the same sandbox

        borrowed = await borrow(answer.sandbox_access, root)
        assert (await borrowed.exec("echo hi > a.txt && cat a.txt")).stdout == "hi\n"
        assert server._sessions["rs-1"].sandbox.read_file("a.txt") == b"hi\n"
        closed = await http.post(
            "/close_session", json={k: seed[k] for k in ("resources_session_id", "episode_id")}
        )
        assert closed.status_code == 200, closed.text
        with pytest.raises(RuntimeError, match="closed by its owner"):
            await borrowed.exec("true")
        await borrowed.disconnect()


async def test_without_the_option_nothing_is_lent() -> None:
    async with math_server(lend=False) as (server, http, _root):
        seeded = await http.post("/seed_session", json=ROW)
        assert (seeded.status_code, seeded.json()) == (200, {})
        (session,) = server._sessions.values()
        assert type(session.sandbox) is BubblewrapSandbox


async def test_only_bubblewrap_sandboxes_are_lent(tmp_path: Path) -> None:
    config = ProRLMathConfig(
        host="127.0.0.1", port=0, entrypoint="app.py", name="prorl_math", sandbox_access_provider_ref=REF,
        sandbox=SandboxSpec(backend="local_unsafe", root_dir=tmp_path),
    )  # fmt: skip
    server = ProRLMathServer(config=config, server_client=standalone_server_client())
    with pytest.raises(RuntimeError, match="local_unsafe"):
        await server.open_session("s", {"expected_answer": "42"})
    assert not server._sessions and not any(tmp_path.iterdir())  # the sandbox was closed again
    await server.close_all()


# -- Gym's single_agent_turn environment server drives it, with an agent that borrows ---------------


def borrowing_agent(root: Path, after_turn: Callable[[], None]) -> FastAPI:
    """A minimal Gym 0.7 agent server that works in the sandbox its seed lends, as `hermes_agent`
    does: connect at seed, run its commands there, `disconnect()` at close. Its one "model turn"
    computes the answer inside the sandbox and leaves a file there (`after_turn` looks at it)."""
    app = FastAPI()
    sandboxes: dict[str, AsyncSandbox] = {}

    @app.post("/v1/agent_sessions")
    async def seed(body: AgentSeedSessionRequest, response: Response) -> AgentSeedSessionResponse:
        assert body.sandbox_access is not None, "the resources server lent no sandbox"
        sandboxes[body.agent_session_id] = await borrow(body.sandbox_access, root)
        response.set_cookie("agent_session", body.agent_session_id)
        return AgentSeedSessionResponse(agent_session_id=body.agent_session_id)

    @app.post("/ng-rollout/{capture_key}/v1/responses")
    async def respond(request: Request) -> dict[str, Any]:
        sandbox = sandboxes[request.cookies["agent_session"]]
        result = await sandbox.exec("python3 -c 'print(6 * 7)' | tee answer.txt")
        after_turn()
        return _response(f"It is \\boxed{{{result.stdout.strip()}}}.")

    @app.post("/v1/agent_sessions/close")
    async def close(body: AgentCloseSessionRequest) -> AgentCloseSessionResponse:
        await sandboxes.pop(body.agent_session_id).disconnect()
        return AgentCloseSessionResponse(agent_session_id=body.agent_session_id)

    return app


class _Servers:
    """Gym's server client, reaching each server's app in process by its Gym name."""

    def __init__(self, apps: dict[str, Any]) -> None:
        # Each server's config block as Gym nests it (the agent's is read for token capture).
        self.global_config_dict = OmegaConf.create({name: {"x": {name: {}}} for name in apps})
        self.http = {name: httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=f"http://{name}")
                     for name, app in apps.items()}  # fmt: skip

    def _resolve_base_url(self, server_name: str) -> str:
        return f"http://{server_name}"

    async def post(
        self,
        server_name: str,
        url_path: str,
        json: Any = None,
        cookies: dict[str, str] | None = None,
        **_: Any,
    ) -> GymReply:
        http = self.http[server_name]
        http.cookies = httpx.Cookies(cookies or {})
        if isinstance(json, BaseModel):  # as Gym's client sends a model body
            json = json.model_dump(mode="json", exclude_unset=True)
        return GymReply(await http.post(url_path, json=json, timeout=60))


async def test_single_agent_turn_drives_a_prorl_server_with_an_agent_in_its_sandbox() -> None:
    async with math_server(lend=True) as (server, _http, root):
        answers: list[bytes] = []

        def after_turn() -> None:  # the agent's file, as the session's own sandbox has it
            answers.extend(s.sandbox.read_file("answer.txt") for s in server._sessions.values())

        agent = borrowing_agent(root, after_turn)
        servers = _Servers({"prorl_math": server.setup_webserver(), "borrower": agent})
        config = SingleAgentTurnEnvironmentServerConfig(
            host="127.0.0.1", port=0, entrypoint="app.py", name="env", cleanup_timeout_seconds=30,
            resources_server={"type": "resources_servers", "name": "prorl_math"},
            agent_server={"type": "responses_api_agents", "name": "borrower"},
        )  # fmt: skip
        environment = SingleAgentTurnEnvironmentServer(
            config=config, server_client=standalone_server_client()
        )
        environment.server_client = servers  # type: ignore[assignment]
        request = SingleAgentTurnRequest.model_validate(
            {
                "episode_id": {"rollout_id": "r1"},
                "task": {"task_id": {"taskset": "math", "task_id": "t1"}, "task_input": ROW},
            }
        )
        cleanup = CleanupContext(episode_id=request.episode_id, cleanup_timeout_seconds=30)
        try:
            turn = await environment.run(request, cleanup)
        finally:
            await cleanup.aclose()
            for client in servers.http.values():
                await client.aclose()
        assert turn.result is not None and turn.result.reward == 1.0, turn
        assert answers == [b"42\n"]
        # Verify and close ended the session's sandbox; the agent's disconnect left nothing either.
        assert (
            not server._sessions and not list(root.glob("bubblewrap*")) and not list(root.glob("borrower/*"))
        )
