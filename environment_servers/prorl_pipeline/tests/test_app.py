# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The server's own checks, runnable alone (`gym env test`): its config and its routes. Episodes
through the real agent app are specified in the project's tests/integrations/test_gym_environment_server.py."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi import FastAPI
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


def test_a_collection_run_is_unnamed_by_default_and_named_as_gyms_rollout_ids_are() -> None:
    assert config().collection_run is None
    assert config(collection_run="grpo-step-12.a_1").collection_run == "grpo-step-12.a_1"
    for bad in ("", "-leading-dash", "has space", "slash/inside"):
        with pytest.raises(ValueError, match="collection_run"):
            config(collection_run=bad)


def app() -> FastAPI:
    client = ServerClient(
        head_server_config=BaseServerConfig(host="127.0.0.1", port=11000),
        global_config_dict=OmegaConf.create({}),
    )
    return ProRLPipelineEnvironmentServer(config=config(), server_client=client).setup_webserver()


def test_it_serves_one_run_for_both_row_shapes_and_aggregate_metrics() -> None:
    paths = {(route.path, method) for route in app().routes for method in getattr(route, "methods", ())}
    assert {("/run", "POST"), ("/aggregate_metrics", "POST")} <= paths


def schema_refs(schema: dict[str, Any]) -> set[str]:
    return {option["$ref"].rsplit("/", 1)[-1] for option in schema["oneOf"]}


def test_run_is_typed_in_the_openapi_schema_for_both_shapes_and_every_answer() -> None:
    spec = app().openapi()
    run = spec["paths"]["/run"]["post"]
    body = run["requestBody"]["content"]["application/json"]["schema"]
    assert schema_refs(body) == {"ProRLEpisodeRequest", "FlatRow"}
    answer = run["responses"]["200"]["content"]["application/json"]["schema"]
    assert schema_refs(answer) == {"ProRLEpisodeResponse", "FlatResult", "FlatFailure"}
    # Gym's keys, as collection reads them
    flat_row = spec["components"]["schemas"]["FlatRow"]["properties"]
    assert {"agent_ref", "task_source", "_ng_task_index", "_ng_attempt_index"} <= set(flat_row)
    failure = spec["components"]["schemas"]["FlatFailure"]["properties"]
    assert {"_ng_failure_class", "_ng_failure_terminal", "_ng_failure_message", "_ng_failure_stage"} <= set(
        failure
    )
    aggregate = spec["paths"]["/aggregate_metrics"]["post"]["requestBody"]["content"]["application/json"]
    assert aggregate["schema"]["$ref"].endswith("/AggregateMetricsRequest")
