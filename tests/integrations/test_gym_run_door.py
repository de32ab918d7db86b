# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The Gym agent's `/run` is a door like `prorl serve`'s: a row no stage could run, in any domain,
is answered 400 `invalid_instance` naming its field (the same rows and fields as there), by the
real resources server of its domain at `/seed_session`, before any sandbox opens and without a
model call."""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.gym_fakes import ScriptedDialect, scripted_runtime
from support.unrunnable_rows import UNRUNNABLE

from nemo_gym_prorl.integrations.gym.config import ProRLAgentSettings
from nemo_gym_prorl.integrations.gym.resources_server import ProRLTaskServer, standalone_server_client
from nemo_gym_prorl.integrations.gym.transport import ResourcesReply
from nemo_gym_prorl.pipeline import PipelineConfig
from nemo_gym_prorl.sandbox import SandboxSpec
from resources_servers.prorl_code.app import ProRLCodeConfig, ProRLCodeServer
from resources_servers.prorl_math.app import ProRLMathConfig, ProRLMathServer
from resources_servers.prorl_stem.app import ProRLStemConfig, ProRLStemServer
from resources_servers.prorl_swe.app import ProRLSweConfig, ProRLSweServer

SERVERS = {
    "prorl_math": (ProRLMathServer, ProRLMathConfig),
    "prorl_stem": (ProRLStemServer, ProRLStemConfig),
    "prorl_code": (ProRLCodeServer, ProRLCodeConfig),
    "prorl_swe": (ProRLSweServer, ProRLSweConfig),
}


class DomainServers:
    """Each domain's real resources server app, reached in process (ASGI) by its Gym name."""

    def __init__(self, root: Path) -> None:
        self.servers: dict[str, ProRLTaskServer] = {}
        self.http: dict[str, httpx.AsyncClient] = {}
        for name, (server_cls, config_cls) in SERVERS.items():
            config = config_cls(host="127.0.0.1", port=0, entrypoint="app.py", name=name,
                                sandbox=SandboxSpec(root_dir=root))  # fmt: skip
            server = server_cls(config=config, server_client=standalone_server_client())
            self.servers[name] = server
            transport = httpx.ASGITransport(app=server.setup_webserver())
            self.http[name] = httpx.AsyncClient(transport=transport, base_url=f"http://{name}")

    async def post(self, server: str, path: str, body: Any, cookies: Mapping[str, str]) -> ResourcesReply:
        http = self.http[server]
        http.cookies = httpx.Cookies(dict(cookies))
        response = await http.post(path, json=body)
        return ResourcesReply(response.status_code, response.json(), {**cookies, **dict(response.cookies)})

    async def close(self) -> None:
        for http in self.http.values():
            await http.aclose()
        for server in self.servers.values():
            await server.close_all()


@pytest.fixture
async def domains() -> AsyncIterator[tuple[DomainServers, Path]]:
    with tempfile.TemporaryDirectory(prefix="door-", dir="/tmp") as root:
        servers = DomainServers(Path(root))
        yield servers, Path(root)
        await servers.close()


@pytest.mark.parametrize("case", list(UNRUNNABLE))
async def test_a_row_no_stage_could_run_is_refused_by_run_naming_its_field(
    domains: tuple[DomainServers, Path], case: str
) -> None:
    servers, root = domains
    instance, field = UNRUNNABLE[case]
    dialect = ScriptedDialect([])  # a model call would fail the test: there is no reply to give
    settings = ProRLAgentSettings(pipeline=PipelineConfig(init_workers=1, run_workers=1, eval_workers=1))
    runtime = scripted_runtime(settings, dialect, lambda: servers, {name: name for name in SERVERS})
    try:
        outcome = await runtime.run(instance)
    finally:
        await runtime.close()
    assert outcome.status == 400, outcome.body
    assert outcome.body["error"] == "invalid_instance"
    assert f"instance.{field}:" in str(outcome.body["detail"]), outcome.body
    assert not any(server._sessions for server in servers.servers.values())
    assert not any(root.iterdir())  # no sandbox was opened
