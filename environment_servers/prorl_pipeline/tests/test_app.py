# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The server's own checks, runnable alone (`gym env test`): its config and its routes. Episodes
through the real agent app are specified in the project's tests/integrations/test_gym_environment_server.py."""

from __future__ import annotations

import pytest
from nemo_gym.config_types import BaseServerConfig
from nemo_gym.server_utils import ServerClient
from omegaconf import OmegaConf

from environment_servers.prorl_pipeline.app import (
    ProRLPipelineEnvironmentServer,
    ProRLPipelineEnvironmentServerConfig,
)

AGENT = {"type": "responses_api_agents", "name": "prorl_agent"}


def config(**limits: object) -> ProRLPipelineEnvironmentServerConfig:
    return ProRLPipelineEnvironmentServerConfig(
        host="127.0.0.1", port=0, entrypoint="app.py", name="env", agent_server=AGENT, **limits
    )


def test_gyms_limits_are_its_config_with_a_deadline_margin_inside_the_episode_deadline() -> None:
    cfg = config(max_concurrent_episodes=4, queue_timeout_seconds=30)
    assert cfg.default_episode_timeout_seconds > cfg.deadline_margin_seconds
    with pytest.raises(ValueError, match="deadline_margin_seconds"):
        config(default_episode_timeout_seconds=5, deadline_margin_seconds=5)
    with pytest.raises(ValueError, match="queue_timeout_seconds"):
        config(max_concurrent_episodes=4)  # Gym's own rule: admission needs a queue timeout


def test_it_serves_one_run_for_both_row_shapes_and_aggregate_metrics() -> None:
    client = ServerClient(
        head_server_config=BaseServerConfig(host="127.0.0.1", port=11000),
        global_config_dict=OmegaConf.create({}),
    )
    app = ProRLPipelineEnvironmentServer(config=config(), server_client=client).setup_webserver()
    paths = {(route.path, method) for route in app.routes for method in getattr(route, "methods", ())}
    assert {("/run", "POST"), ("/aggregate_metrics", "POST")} <= paths
