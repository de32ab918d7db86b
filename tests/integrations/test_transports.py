# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""One rollout handler, two transports: the same tool calls give the model the same
observations whether the tools run in this process (`prorl serve`) or behind a NeMo Gym
resources server over HTTP (the Gym agent). Real bubblewrap sandboxes, a real resources server
app (the code domain's), reached through an ASGI transport instead of a socket."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import AsyncIterator, Iterator, Mapping
from pathlib import Path
from typing import Any
from unittest.mock import MagicMock

import httpx
import pytest
from nemo_gym.server_utils import ServerClient

from nemo_gym_prorl.agent.handler import InProcessTransport
from nemo_gym_prorl.integrations.gym.resources_server import ProRLServerConfig, ProRLTaskServer
from nemo_gym_prorl.integrations.gym.transport import (
    ResourcesCommands,
    ResourcesReply,
    ResourcesServerTransport,
    ResourcesToolExecutor,
)
from nemo_gym_prorl.pipeline.handler import RolloutFailure
from nemo_gym_prorl.pipeline.job import Job
from nemo_gym_prorl.sandbox import SandboxSpec
from nemo_gym_prorl.tasks.code import CodeConfig, CodeTask
from nemo_gym_prorl.tools import ToolBoxConfig, tool_specs

pytestmark = pytest.mark.bwrap

TOOLS = ["bash", "editor", "ipython", "submit"]

# (tool name, arguments as the model sent them: OpenAI's JSON string)
CALLS: list[tuple[str, str]] = [
    ("bash", '{"command": "echo hello && mkdir -p sub && cd sub"}'),
    ("bash", '{"command": "pwd; exit 3"}'),
    ("bash", '{"command": '),  # broken JSON
    ("bash", '["ls"]'),  # not an object
    ("bash", '{"cmd": "ls"}'),  # wrong field
    ("rm_rf", "{}"),  # unknown tool
    ("editor", '{"command": "create", "path": "/workspace/a.py", "file_text": "x = 6 * 7\\n"}'),
    ("editor", '{"command": "view", "path": "/workspace/a.py"}'),
    ("editor", '{"command": "view", "path": "/workspace/missing.py"}'),
    ("ipython", '{"code": "exec(open(\'/workspace/a.py\').read()); print(x)"}'),
    ("ipython", '{"code": "1 / 0"}'),
    ("ipython", ""),  # no arguments at all
]


class CodeServer(ProRLTaskServer):
    task_tools = ("bash", "editor", "ipython")

    def make_task(self) -> CodeTask:
        return CodeTask(CodeConfig())


class ASGIResources:
    """A `ResourcesClient` over an in-process ASGI app (cookies as Gym's ServerClient keeps them)."""

    def __init__(self, app: Any) -> None:
        self.http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://prorl_code")

    async def post(self, server: str, path: str, body: Any, cookies: Mapping[str, str]) -> ResourcesReply:
        self.http.cookies = httpx.Cookies(dict(cookies))
        response = await self.http.post(path, json=body)
        return ResourcesReply(response.status_code, response.json(), {**cookies, **dict(response.cookies)})


def code_server(root: Path) -> CodeServer:
    """The code domain's resources server, its sandboxes under `root` (no Gym head needed)."""
    return CodeServer(
        config=ProRLServerConfig(
            host="127.0.0.1", port=0, entrypoint="app.py", name="prorl_code", domain="coding",
            sandbox=SandboxSpec(root_dir=root),
        ),
        server_client=MagicMock(spec=ServerClient),
    )  # fmt: skip


def row() -> dict[str, Any]:
    specs = [{"type": "function", **spec["function"]} for spec in tool_specs(TOOLS)]
    return {
        "responses_create_params": {"input": [{"role": "user", "content": "write a.py"}], "tools": specs},
        "tools_offered": ["bash", "editor", "ipython"],
        "verifier_metadata": {"unit_tests": {"inputs": ["1\n"], "outputs": ["1\n"]}},
    }


def job(instance: dict[str, Any]) -> Job:
    return Job(
        id="j1", task="prorl_code", instance=instance, sampling_params={}, priority=0,
        active_time_s=120, wall_time_s=None, group_id=None, metadata={},
    )  # fmt: skip


def comparable(observation: Any) -> dict[str, Any]:
    """Everything the model and the trainer see, less how long it took."""
    data = observation.model_dump()
    data["metadata"] = {k: v for k, v in data["metadata"].items() if k != "duration_s"}
    return data


@pytest.fixture
def short_root() -> Iterator[Path]:
    """Kernel sockets live in the workspace: its path must stay short (Unix sockets)."""
    with tempfile.TemporaryDirectory(prefix="tr", dir="/tmp") as root:
        yield Path(root)


@contextlib.asynccontextmanager
async def both_transports(
    local: InProcessTransport, server_root: Path
) -> AsyncIterator[tuple[Any, Any, ASGIResources]]:
    """One job opened in process (`local`) and through the code resources server's HTTP routes
    (its sandboxes under `server_root`): both states and the server's client. Both are released
    after, and the remote session with them."""
    server = code_server(server_root)
    client = ASGIResources(server.setup_webserver())
    remote = ResourcesServerTransport("prorl_code", client)
    the_job = job(row())
    local_state = await local.open(the_job)
    remote_state = await remote.open(the_job)
    try:
        yield local_state, remote_state, client
    finally:
        await local.release(local_state)
        await remote.release(remote_state)
        await server.close_all()
        await client.http.aclose()
    assert not server._sessions  # the remote session was closed by its release


async def test_the_same_tool_calls_give_the_same_observations_on_both_transports(short_root: Path) -> None:
    local = InProcessTransport(
        CodeTask(CodeConfig()), sandbox=SandboxSpec(root_dir=short_root / "l"), tools=ToolBoxConfig()
    )
    async with both_transports(local, short_root / "s") as (local_state, remote_state, _):
        assert [s["function"]["name"] for s in local_state.tools.specs()] == TOOLS
        assert remote_state.tools.specs() == local_state.tools.specs()
        seen = []
        for name, arguments in CALLS:
            here = await local_state.tools.call(name, arguments)
            there = await remote_state.tools.call(name, arguments)
            assert comparable(there) == comparable(here), (name, arguments)
            seen.append(here)
        # the calls really ran: errors where the model erred, output where it did not
        assert "hello" in seen[0].text and not seen[0].is_error
        assert all(o.is_error for o in seen[2:6])
        assert seen[5].text.startswith("Unknown tool `rm_rf`.")
        assert seen[9].text.strip() == "42"


COMMANDS: list[tuple[str, float]] = [
    ("echo hello; echo oops >&2; exit 3", 10.0),
    ("cat; uniq; echo read-eof", 10.0),  # a command reading the terminal gets end-of-file at once
    ("pwd", 10.0),
    ("sleep 5", 0.5),  # its time limit
]


async def test_a_harness_command_runs_the_same_in_process_and_through_exec(short_root: Path) -> None:
    """A harness's commands (`state.commands`): in the sandbox this process holds, or through the
    resources server's `/exec` in its session's sandbox, with the same result."""
    local = InProcessTransport(
        CodeTask(CodeConfig()), sandbox=SandboxSpec(root_dir=short_root / "l"), offer_tools=False
    )
    async with both_transports(local, short_root / "s") as (local_state, remote_state, client):
        for command, timeout in COMMANDS:
            here = await local_state.commands.exec(command, cwd=None, timeout_s=timeout)
            there = await remote_state.commands.exec(command, cwd=None, timeout_s=timeout)
            fields = ("exit_code", "stdout", "stderr", "timed_out")
            assert [getattr(there, f) for f in fields] == [getattr(here, f) for f in fields], command
        assert (here.timed_out, here.exit_code) == (True, -1)
        first = await remote_state.commands.exec(COMMANDS[0][0], cwd=None, timeout_s=10)
        assert (first.exit_code, first.stdout, first.stderr) == (3, "hello\n", "oops\n")
        # No session (never seeded, or closed): refused, not run in some other sandbox.
        stranger = ResourcesCommands(ResourcesToolExecutor(client, "prorl_code", {}, []))
        refused = await stranger.exec("echo hi", cwd=None, timeout_s=10)
        assert refused.exit_code == -1 and "HTTP 404" in refused.stderr and not refused.stdout


async def test_a_row_the_domain_cannot_run_is_refused_at_seed_before_any_sandbox(short_root: Path) -> None:
    """Through Gym the domain's own check runs where the domain lives, at `/seed_session`: the
    same `invalid_instance` naming the field that `prorl serve` answers at submit (`/run` answers
    it as its 400)."""
    server = code_server(short_root)
    client = ASGIResources(server.setup_webserver())
    untested = {k: v for k, v in row().items() if k != "verifier_metadata"}
    try:
        with pytest.raises(RolloutFailure) as refused:
            await ResourcesServerTransport("prorl_code", client).open(job(untested))
        failure = refused.value.classification()
        assert (failure.kind, failure.status, failure.code) == ("data", 400, "invalid_instance")
        assert failure.message.startswith("instance.verifier_metadata:")
        assert not server._sessions and not any(short_root.iterdir())  # no sandbox was opened
    finally:
        await client.http.aclose()
