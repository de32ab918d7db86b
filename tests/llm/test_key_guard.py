# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The model server's key, without a model: the middleware vLLM loads refuses whatever lacks the
key but a GET of /health, the launch puts the key in the server's environment and never on its
command line, the key file is the user's alone, and every client of the project sends the key
(the pool's requests, the model lookup, policy publishing). `test_embedded_key.py` checks the same
on the real server."""

from __future__ import annotations

import os
import stat
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiohttp import web

from nemo_gym_prorl.llm.access import LLMAccess
from nemo_gym_prorl.llm.dialects import VLLMCompletionsDialect
from nemo_gym_prorl.llm.embedded import keyed_launch, new_api_key, write_key_file
from nemo_gym_prorl.llm.embedded.server import KEY_ENV, KEY_GUARD_DIR
from nemo_gym_prorl.llm.embedded.vllm_plugins.prorl_key_guard import RequireKey
from nemo_gym_prorl.llm.policy import restore_launch_weights
from nemo_gym_prorl.llm.pool import LLMBackendPool, PoolConfig

KEY = "k3y-for-tests"


async def inner_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """What vLLM would answer: 200 to anything that gets through."""
    if scope["type"] == "websocket":
        await send({"type": "websocket.accept"})
        return
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})


@pytest.fixture
async def guarded(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[httpx.AsyncClient]:
    monkeypatch.setenv(KEY_ENV, KEY)
    transport = httpx.ASGITransport(app=RequireKey(inner_app))
    async with httpx.AsyncClient(transport=transport, base_url="http://vllm") as http:
        yield http


DEV_AND_GENERATION_ROUTES = [
    ("POST", "/collective_rpc"),
    ("POST", "/v1/load_lora_adapter"),
    ("POST", "/v1/unload_lora_adapter"),
    ("POST", "/sleep"),
    ("POST", "/wake_up"),
    ("POST", "/reset_prefix_cache"),
    ("GET", "/server_info"),
    ("POST", "/invocations"),
    ("POST", "/tokenize"),
    ("POST", "/v1/completions"),
    ("POST", "/inference/v1/generate"),
    ("GET", "/openapi.json"),
    ("POST", "/health"),  # open to a GET only
    ("OPTIONS", "/v1/completions"),
]


async def test_every_route_but_a_get_of_health_needs_the_key(guarded: httpx.AsyncClient) -> None:
    assert (await guarded.get("/health")).status_code == 200
    for method, path in DEV_AND_GENERATION_ROUTES:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": KEY}):
            answer = await guarded.request(method, path, headers=headers)
            assert answer.status_code == 401, (method, path, headers)
            assert answer.headers["www-authenticate"] == "Bearer"
        keyed = await guarded.request(method, path, headers={"Authorization": f"Bearer {KEY}"})
        assert keyed.status_code == 200, (method, path)


async def test_a_websocket_without_the_key_is_closed_before_it_opens(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "websocket", "path": "/v1/realtime", "headers": []}
    await RequireKey(inner_app)(scope, None, send)
    assert sent == [{"type": "websocket.close", "code": 1008}]


def test_the_guard_will_not_serve_without_a_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    with pytest.raises(RuntimeError, match="open to anyone"):
        RequireKey(inner_app)


def test_the_key_travels_in_the_servers_environment_never_on_its_command_line() -> None:
    key = new_api_key()
    assert len(key) >= 40 and key != new_api_key()
    cmd, env = keyed_launch(["python", "-m", "vllm"], {"PYTHONPATH": "/elsewhere", "HOME": "/h"}, key)
    assert key not in " ".join(cmd)
    assert cmd[-2:] == ["--middleware", "prorl_key_guard.RequireKey"]
    assert env[KEY_ENV] == key and env["HOME"] == "/h"
    assert env["PYTHONPATH"] == f"{KEY_GUARD_DIR}{os.pathsep}/elsewhere"
    # The folder vLLM imports from holds the guard alone: nothing of ours shadows its modules.
    assert sorted(p.name for p in KEY_GUARD_DIR.glob("*.py")) == ["__init__.py", "prorl_key_guard.py"]


def test_the_key_file_is_its_users_alone_and_replaces_an_old_one(tmp_path: Path) -> None:
    path = tmp_path / "keys" / "vllm-8000.key"
    write_key_file(path, "old")
    path.chmod(0o644)  # a file an earlier server left, opened up since
    write_key_file(path, KEY)
    assert path.read_text() == f"{KEY}\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_the_pool_takes_the_key_from_its_file(tmp_path: Path) -> None:
    path = tmp_path / "model.key"
    write_key_file(path, KEY)
    assert PoolConfig(api_key_file=path).resolved_api_key() == KEY
    assert PoolConfig(api_key="given", api_key_file=path).resolved_api_key() == "given"
    with pytest.raises(ValueError, match=r"cannot read llm\.api_key_file"):
        PoolConfig(api_key_file=tmp_path / "missing").resolved_api_key()


async def test_every_client_of_the_backend_sends_the_key() -> None:
    # A real server on loopback: the pool's model calls and its one-off requests use different
    # HTTP clients, and each must carry the key.
    seen: list[tuple[str, str | None]] = []

    async def backend(request: web.Request) -> web.Response:
        seen.append((request.path, request.headers.get("authorization")))
        if request.path == "/v1/models":
            return web.json_response({"data": [{"id": "m"}]})
        if request.path == "/openapi.json":
            return web.json_response({"paths": {"/v1/load_lora_adapter": {}, "/collective_rpc": {}}})
        return web.json_response({"tokens": [1, 2]})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", backend)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    url = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"  # type: ignore[union-attr]
    try:
        client = httpx.AsyncClient()
        config = PoolConfig(backends=[url], api_key=KEY, health_path=None)
        async with LLMBackendPool(config, client=client) as pool:
            await pool.post_json("/tokenize", {"prompt": "x"})
            assert (
                await LLMAccess(pool=pool, dialect=VLLMCompletionsDialect(), model=None).model_name() == "m"
            )
            await restore_launch_weights(client, url, served_name="m", weights_path="/w", api_key=KEY)
        await client.aclose()
    finally:
        await runner.cleanup()
    paths = {path for path, _ in seen}
    assert {"/tokenize", "/v1/models", "/openapi.json", "/collective_rpc", "/reset_prefix_cache"} <= paths
    assert all(auth == f"Bearer {KEY}" for _, auth in seen), seen
