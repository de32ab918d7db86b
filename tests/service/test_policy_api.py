# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""`POST /v1/policy` publishes a trained adapter to every backend through the one stack, behind
the API token; `GET /v1/policy` says what is served and what rollouts are judged against; the
Python client does both. Against fake vLLM backends with runtime LoRA (test doubles)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from support.fake_llm import FakeLLM
from support.scripted_stages import ScriptedHandler

from nemo_gym_prorl.llm.access import LLMConfig
from nemo_gym_prorl.pipeline import HandlerRegistry
from nemo_gym_prorl.service.client import AsyncRolloutClient
from nemo_gym_prorl.service.stack import RolloutStack, StackConfig, build_stack

TOKEN = "policy-token-for-tests"


def adapter(tmp_path: Path, name: str) -> str:
    directory = tmp_path / name
    directory.mkdir()
    (directory / "adapter_config.json").write_text('{"r": 16}')
    return str(directory)


def scripted(llm: object, backends: object) -> HandlerRegistry:
    registry = HandlerRegistry()
    registry.register("s", ScriptedHandler())
    return registry


@pytest.fixture
async def backends() -> AsyncIterator[list[FakeLLM]]:
    servers = [await FakeLLM().start(), await FakeLLM().start()]
    yield servers
    for server in servers:
        await server.kill()


@pytest.fixture
async def stack(backends: list[FakeLLM]) -> AsyncIterator[RolloutStack]:
    config = StackConfig(
        llm=LLMConfig(backends=[b.url for b in backends], model="fake"),
        pipeline={"staleness": {"max_staleness": 2, "action": "drop"}},
    )
    built = build_stack(config, scripted)
    await built.start()
    yield built
    await built.close()


@pytest.fixture
async def http(stack: RolloutStack) -> AsyncIterator[httpx.AsyncClient]:
    app = stack.app(token=TOKEN)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),
        base_url="http://test",
        headers={"Authorization": f"Bearer {TOKEN}"},
    ) as client:
        yield client


async def test_a_publish_loads_the_adapter_on_every_backend_and_moves_the_trainer_clock(
    http: httpx.AsyncClient, backends: list[FakeLLM], tmp_path: Path
) -> None:
    path = adapter(tmp_path, "step1")
    response = await http.post("/v1/policy", json={"version": 1, "adapter_path": path})
    assert response.status_code == 200, response.text
    report = response.json()
    loaded = sorted(b["backend"] for b in report["backends"] if b["loaded"])
    assert report["served_name"] == "policy-v1" and loaded == sorted(b.url for b in backends)
    assert all(b.loras == {"policy-v1": path} for b in backends)
    state = (await http.get("/v1/policy")).json()
    assert state["trainer_version"] == 1 and state["served"]["current"]["version"] == 1
    assert state["staleness"] == {"max_staleness": 2, "action": "drop", "max_reruns": 2}
    metrics = (await http.get("/metrics")).text
    assert "prorl_policy_version 1.0" in metrics


async def test_publishing_needs_the_token(http: httpx.AsyncClient, tmp_path: Path) -> None:
    response = await http.post(
        "/v1/policy",
        json={"version": 1, "adapter_path": adapter(tmp_path, "a")},
        headers={"Authorization": ""},
    )
    assert response.status_code == 401


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"version": 1, "adapter_path": "/nonexistent/adapter"}, 422, "policy_not_loaded"),
        ({"version": 1, "weights_path": "/nonexistent/weights"}, 422, "policy_not_loaded"),
        ({"version": 0, "adapter_path": "/x"}, 422, "invalid_request"),
        ({"adapter_path": "/x"}, 422, "invalid_request"),
    ],
)
async def test_a_publish_that_cannot_be_served_is_a_clear_error(
    http: httpx.AsyncClient, body: dict[str, object], status: int, code: str
) -> None:
    response = await http.post("/v1/policy", json=body)
    assert response.status_code == status, response.text
    assert response.json()["error"] == code
    assert (await http.get("/v1/policy")).json()["served"]["current"] is None  # nothing changed


async def test_versions_only_move_forward(http: httpx.AsyncClient, tmp_path: Path) -> None:
    first = await http.post("/v1/policy", json={"version": 2, "adapter_path": adapter(tmp_path, "a")})
    assert first.status_code == 200
    again = await http.post("/v1/policy", json={"version": 2, "adapter_path": adapter(tmp_path, "b")})
    assert again.status_code == 409 and again.json()["error"] == "stale_version"


async def test_the_python_client_publishes_and_reads_the_policy(
    stack: RolloutStack, backends: list[FakeLLM], tmp_path: Path
) -> None:
    transport = httpx.ASGITransport(app=stack.app(token=TOKEN))
    async with AsyncRolloutClient("http://test", token=TOKEN, transport=transport) as client:
        report = await client.publish_policy(1, adapter(tmp_path, "step1"))
        state = await client.policy()
    assert report.version == 1 and len(report.loaded) == len(backends) and not report.failed
    assert state.trainer_version == 1 and state.served.current is not None
