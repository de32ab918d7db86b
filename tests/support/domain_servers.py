# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The project's four real resources servers (math, STEM, code, SWE), each reached in process
over ASGI by its Gym name: the `ResourcesClient` of a Gym agent built in a test, with sandboxes
under one root the test can inspect. `down` names servers that refuse connections."""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx

from nemo_gym_prorl.integrations.gym.resources_server import ProRLTaskServer, standalone_server_client
from nemo_gym_prorl.integrations.gym.transport import ResourcesReply, ResourcesUnavailableError
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
GYM_NAMES = {name: name for name in SERVERS}
"""The agent's `resources_servers` map: each domain's `data_source` is its server's name."""


class DomainServers:
    """Each domain's real resources server app, reached in process (ASGI) by its Gym name."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.servers: dict[str, ProRLTaskServer] = {}
        self.http: dict[str, httpx.AsyncClient] = {}
        self.down: set[str] = set()
        for name, (server_cls, config_cls) in SERVERS.items():
            config = config_cls(host="127.0.0.1", port=0, entrypoint="app.py", name=name,
                                sandbox=SandboxSpec(root_dir=root))  # fmt: skip
            server = server_cls(config=config, server_client=standalone_server_client())
            self.servers[name] = server
            transport = httpx.ASGITransport(app=server.setup_webserver())
            self.http[name] = httpx.AsyncClient(transport=transport, base_url=f"http://{name}")

    async def post(self, server: str, path: str, body: Any, cookies: Mapping[str, str]) -> ResourcesReply:
        if server in self.down:
            raise ResourcesUnavailableError(f"{server}{path}: connection refused")
        http = self.http[server]
        http.cookies = httpx.Cookies(dict(cookies))
        response = await http.post(path, json=body)
        return ResourcesReply(response.status_code, response.json(), {**cookies, **dict(response.cookies)})

    def base_url(self, server: str) -> str | None:
        return None  # in process: no address another node could reach

    def open_sessions(self) -> int:
        """Sessions open on all servers: each holds a sandbox."""
        return sum(len(server._sessions) for server in self.servers.values())

    def sandboxes_made(self) -> bool:
        """Whether any sandbox was ever made under the root (each leaves its directory there)."""
        return any(self.root.iterdir())

    async def close(self) -> None:
        for http in self.http.values():
            await http.aclose()
        for server in self.servers.values():
            await server.close_all()


@asynccontextmanager
async def domain_servers() -> AsyncIterator[DomainServers]:
    """The four servers, their sandboxes under a fresh short root (Unix sockets live there)."""
    with tempfile.TemporaryDirectory(prefix="door-", dir="/tmp") as root:
        servers = DomainServers(Path(root))
        try:
            yield servers
        finally:
            await servers.close()
