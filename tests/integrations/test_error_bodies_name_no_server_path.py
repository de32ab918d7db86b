# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""An error answer says what was wrong, never where the server keeps its files: an SWE instance
the server neither has nor can build is refused on every door that takes a row (`prorl serve`'s
rollout API, the one the Gym agent mounts, the agent's `/run`, the environment server's `/run`,
the SWE resources server's check and seed) naming the instance, with no PRORL_HOME, home
directory, sandbox root, venv or other absolute path of the server in the body. Where a message
does quote a server path, the redaction under every door turns it into a label."""

from __future__ import annotations

import re
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from support.domain_servers import GYM_NAMES, DomainServers
from support.environment_stack import EnvironmentStack
from support.scripted_model import ScriptedDialect
from support.unrunnable_rows import row

from nemo_gym_prorl.sandbox.base import default_sandbox_root
from nemo_gym_prorl.sandbox.runtime import prorl_home
from nemo_gym_prorl.server_paths import redact_server_paths
from nemo_gym_prorl.service.config import load_config
from nemo_gym_prorl.service.errors import RedactErrorBodies, error_response
from nemo_gym_prorl.service.stack import stack_from_config

UNKNOWN = "nobody__nothing-1"
INSTANCE = row("prorl_swe", instance_id=UNKNOWN)
# Any absolute path of two components or more ("/v1" alone is a route, not a file).
ABSOLUTE_PATH = re.compile(r"(?<![\w.~>])/[\w.+-]+/[\w.+-]+")


def assert_names_no_server_path(text: str, *roots: Path) -> None:
    for root in (prorl_home(), Path.home(), default_sandbox_root(), Path(sys.prefix), *roots):
        assert str(root) not in text and str(root.resolve()) not in text, (root, text)
    assert not ABSOLUTE_PATH.search(text), text


def assert_clear_refusal(text: str, *roots: Path) -> None:
    assert UNKNOWN in text and "neither a full SWE-bench row nor an instance this server has built" in text, (
        text
    )
    assert_names_no_server_path(text, *roots)


async def submit_everywhere(http: httpx.AsyncClient) -> dict[str, httpx.Response]:
    return {
        "/process": await http.post("/process", json={"instance": INSTANCE, "sampling_params": {}}),
        "/v1/rollouts": await http.post("/v1/rollouts", json={"jobs": [{"instance": INSTANCE}]}),
        "/v1/batches": await http.post("/v1/batches", json={"groups": 1, "source": {"rows": [INSTANCE]}}),
    }


async def test_prorl_serve_refuses_an_unknown_swe_instance_naming_no_server_path() -> None:
    stack = stack_from_config(load_config(["llm.health_path=null"]))
    try:
        transport = httpx.ASGITransport(app=stack.app())
        async with httpx.AsyncClient(transport=transport, base_url="http://serve") as http:
            answers = await submit_everywhere(http)
    finally:
        await stack.close()
    for door, answer in answers.items():
        assert answer.status_code == 400 and answer.json()["error"] == "invalid_instance", (door, answer.text)
        assert_clear_refusal(answer.text)


@pytest.fixture
async def gym(domains: DomainServers) -> AsyncIterator[EnvironmentStack]:
    # A model call would fail the test: the scripted model has no reply to give.
    environment = EnvironmentStack(ScriptedDialect([]), lambda: domains, GYM_NAMES)
    await environment.agent.runtime.start()
    yield environment
    await environment.close()


async def test_the_gym_agents_doors_refuse_it_naming_no_server_path(
    gym: EnvironmentStack, domains: DomainServers
) -> None:
    agent = gym.client.http  # the agent's app: its mounted rollout API and its `/run`
    for door, answer in (await submit_everywhere(agent)).items():
        assert answer.status_code == 400 and answer.json()["error"] == "invalid_instance", (door, answer.text)
        assert_clear_refusal(answer.text, domains.root)
    run = await agent.post("/run", json=INSTANCE)
    assert run.status_code == 400, run.text
    assert_clear_refusal(run.text, domains.root)


async def test_the_environment_servers_run_refuses_it_naming_no_server_path(
    gym: EnvironmentStack, domains: DomainServers
) -> None:
    flat = {**INSTANCE, "_ng_task_index": 0, "_ng_rollout_index": 0}
    episode = {
        "episode_id": {"rollout_id": "0-0", "attempt": 0},
        "task": {"task_id": {"taskset": "prorl", "task_id": "0"}, "task_input": INSTANCE},
    }
    for body in (flat, episode):
        reply = await gym.http.post("/run", json=body)
        assert reply.status_code in (200, 400), reply.text  # refused, or Gym's terminal failure
        assert_clear_refusal(reply.text, domains.root)
    assert gym.dialect.calls == 0 and not domains.sandboxes_made()


async def test_an_episode_failure_that_quotes_a_server_path_is_answered_without_it(
    gym: EnvironmentStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    instances = prorl_home() / "swe" / "instances.jsonl"

    async def lost(*_: object, **__: object) -> None:
        raise FileNotFoundError(2, "No such file or directory", str(instances))

    monkeypatch.setattr(gym.agent.runtime, "run_episode", lost)
    episode = {
        "episode_id": {"rollout_id": "0-0", "attempt": 0},
        "task": {
            "task_id": {"taskset": "prorl", "task_id": "0"},
            "task_input": row("prorl_math", expected_answer="4"),
        },
    }
    reply = await gym.http.post("/run", json=episode)
    assert reply.status_code == 200, reply.text
    reason = reply.json()["failure"]["failure_reason"]
    assert "FileNotFoundError" in reason and "$PRORL_HOME/swe/instances.jsonl" in reason, reason
    assert_names_no_server_path(reply.text)


async def test_the_swe_resources_server_refuses_it_naming_no_server_path(domains: DomainServers) -> None:
    swe = domains.http["prorl_swe"]
    for path in ("/check_instance", "/seed_session"):
        answer = await swe.post(path, json=INSTANCE)
        assert answer.status_code == 400, (path, answer.text)
        assert_clear_refusal(answer.text, domains.root)
    assert not domains.sandboxes_made()


def test_a_message_that_quotes_a_server_path_keeps_what_failed_and_loses_the_path() -> None:
    instances = prorl_home() / "swe" / "instances.jsonl"
    workspace = default_sandbox_root() / "sb-1" / "workspace"
    module = Path(sys.prefix) / "lib" / "site-packages" / "x.py"
    text = f"cannot read {instances}; sandbox {workspace} is gone; File {str(module)!r}, line 3"
    redacted = redact_server_paths(text)
    assert redacted == (
        "cannot read $PRORL_HOME/swe/instances.jsonl; sandbox <sandbox root>/sb-1/workspace is gone; "
        "File '<venv>/lib/site-packages/x.py', line 3"
    )
    # A path that only begins like a root is not under it.
    assert "$PRORL_HOME" not in redact_server_paths(f"{prorl_home()}-other/x")


async def test_an_error_answer_built_anywhere_names_no_server_path() -> None:
    secret = Path(tempfile.gettempdir()) / "prorl-sandboxes" / "sb-9"
    body = error_response(500, "boom", f"OSError: {secret}", detail=[{"msg": f"at {secret}"}]).body
    assert_names_no_server_path(body.decode(), secret)

    async def gym_style_app(scope, receive, send) -> None:  # Gym answers an exception's repr
        message = f'"FileNotFoundError(2, {str(secret)!r})"'.encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(message)).encode())]
        await send({"type": "http.response.start", "status": 500, "headers": headers})
        await send({"type": "http.response.body", "body": message})

    transport = httpx.ASGITransport(app=RedactErrorBodies(gym_style_app))
    async with httpx.AsyncClient(transport=transport, base_url="http://gym") as http:
        answer = await http.get("/")
    assert answer.status_code == 500 and "FileNotFoundError" in answer.text
    assert_names_no_server_path(answer.text, secret)


async def test_a_resources_servers_crash_answer_names_no_server_path(
    domains: DomainServers, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An unhandled exception in a resources server (Gym's own error handling, or none) answers a
    500 that names no server path."""
    secret = prorl_home() / "swe" / "instances.jsonl"

    def crash(*args: object, **kwargs: object) -> None:
        raise FileNotFoundError(2, "No such file", str(secret))

    for name, server in domains.servers.items():
        monkeypatch.setattr(type(server), "check_row", crash)
        transport = httpx.ASGITransport(app=server.setup_webserver(), raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url=f"http://{name}") as http:
            answer = await http.post("/seed_session", json={})
        assert answer.status_code == 500, (name, answer.text)
        assert_names_no_server_path(answer.text, secret)
