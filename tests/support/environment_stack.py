# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The environment server `prorl_pipeline` in front of the real ProRL agent app, in process: the
agent's runtime runs a scripted model over the resources client a test gives it (the in-memory
fake or the four real domain servers), and Gym's server client is replaced by one that reaches
the agent app over ASGI (`down` makes the agent unreachable)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from http.cookies import SimpleCookie
from typing import Any

import aiohttp
import httpx
from nemo_gym.config_types import BaseServerConfig
from nemo_gym.server_utils import ServerClient
from omegaconf import DictConfig, OmegaConf

from environment_servers.prorl_pipeline.app import (
    ProRLPipelineEnvironmentServer,
    ProRLPipelineEnvironmentServerConfig,
)
from nemo_gym_prorl.integrations.gym.config import ProRLAgentSettings
from nemo_gym_prorl.integrations.gym.transport import ResourcesClient
from nemo_gym_prorl.pipeline import PipelineConfig
from responses_api_agents.prorl_agent.app import ProRLAgent, ProRLAgentConfig
from support.gym_fakes import scripted_runtime
from support.scripted_model import ScriptedDialect


class GymReply:
    """What Gym's server client returns (aiohttp's response): the parts Gym's servers read."""

    def __init__(self, response: httpx.Response) -> None:
        self.status, self.ok, self._body = response.status_code, response.is_success, response.content
        self.cookies = SimpleCookie()
        for header in response.headers.get_list("set-cookie"):
            self.cookies.load(header)

    async def read(self) -> bytes:
        return self._body

    def raise_for_status(self) -> None:
        if not self.ok:
            raise RuntimeError(f"HTTP {self.status}: {self._body[:500]!r}")


class InProcessClient:
    """Gym's server client, reaching the agent app in process (with the global config it was given)."""

    def __init__(self, agent_app: Any, global_config_dict: DictConfig) -> None:
        self.global_config_dict = global_config_dict
        self.http = httpx.AsyncClient(transport=httpx.ASGITransport(app=agent_app), base_url="http://agent")
        self.down = False
        self.paths: list[str] = []

    async def post(self, server_name: str, url_path: str, json: Any = None, **_: Any) -> GymReply:
        self.paths.append(url_path)
        if self.down:
            raise aiohttp.ClientConnectionError("connection refused")
        return GymReply(await self.http.post(url_path, json=json, timeout=60))


class EnvironmentStack:
    """The environment server (`server`, its app at `http`), the agent it reaches (`agent`).
    `limits`: the environment server's own settings (Gym's limits, `collection_run`)."""

    def __init__(
        self,
        dialect: ScriptedDialect,
        resources: Callable[[], ResourcesClient],
        servers: Mapping[str, str],
        *,
        pipeline: PipelineConfig | None = None,
        **limits: Any,
    ) -> None:
        agent_config = {
            "host": "127.0.0.1", "port": 0, "entrypoint": "app.py", "name": "prorl_agent",
            "model_server": {"type": "responses_api_models", "name": "policy_model"},
            "resources_servers": {name: {"type": "resources_servers", "name": name} for name in servers},
            "llm": {"backends": ["http://127.0.0.1:9"], "health_path": None, "model": "m"},
        }  # fmt: skip
        environment_config = {
            "host": "127.0.0.1", "port": 0, "entrypoint": "app.py", "name": "prorl_agent_environment_server",
            "agent_server": {"type": "responses_api_agents", "name": "prorl_agent"}, **limits,
        }  # fmt: skip
        # What Gym hands every server: the composition, as the shipped configs name its instances.
        self.global_config = OmegaConf.create(
            {
                "prorl_agent": {"responses_api_agents": {"prorl_agent": agent_config}},
                "prorl_agent_environment_server": {
                    "environment_servers": {"prorl_pipeline": environment_config}
                },
            }
        )
        gym_client = ServerClient(
            head_server_config=BaseServerConfig(host="127.0.0.1", port=11000),
            global_config_dict=self.global_config,
        )
        self.agent = ProRLAgent(config=ProRLAgentConfig(**agent_config), server_client=gym_client)
        pipeline = pipeline or PipelineConfig(init_workers=2, run_workers=2, eval_workers=2)
        settings = ProRLAgentSettings(pipeline=pipeline)
        self.agent._runtime = scripted_runtime(settings, dialect, resources, servers)  # type: ignore[arg-type]
        self.dialect = dialect
        self.client = InProcessClient(self.agent.setup_webserver(), self.global_config)
        config = ProRLPipelineEnvironmentServerConfig(**environment_config)
        self.server = ProRLPipelineEnvironmentServer(config=config, server_client=gym_client)
        self.server.server_client = self.client  # type: ignore[assignment]
        app = self.server.setup_webserver()
        self.http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://env")

    async def close(self) -> None:
        await self.http.aclose()
        await self.client.http.aclose()
        await self.agent.runtime.close()
