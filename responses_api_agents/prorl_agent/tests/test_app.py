# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The agent's HTTP face, built as Gym builds it (MagicMock ServerClient + TestClient): /run answers
the runtime's status and body; the rollout API is served by the same app; Gym's liveness stays."""

from __future__ import annotations

from pathlib import Path
from unittest.mock import MagicMock

import pytest
from fastapi.testclient import TestClient
from nemo_gym.config_types import BaseServerConfig
from nemo_gym.server_utils import ServerClient
from omegaconf import OmegaConf
from pydantic import ValidationError

from nemo_gym_prorl.integrations.gym.result import RunOutcome
from responses_api_agents.prorl_agent.app import ProRLAgent, ProRLAgentConfig


def make_agent() -> ProRLAgent:
    config = ProRLAgentConfig(
        host="127.0.0.1", port=0, entrypoint="app.py", name="prorl_agent",
        model_server={"type": "responses_api_models", "name": "policy_model"},
        resources_servers={"prorl_math": {"type": "resources_servers", "name": "prorl_math"}},
        llm={"backends": ["http://127.0.0.1:9"], "health_path": None, "model": "m"},
    )  # fmt: skip
    client = MagicMock(spec=ServerClient)
    client.global_config_dict = OmegaConf.create({})
    client.head_server_config = BaseServerConfig(host="127.0.0.1", port=11000)
    return ProRLAgent(config=config, server_client=client)


def test_run_answers_the_runtime_outcome() -> None:
    agent = make_agent()
    app = agent.setup_webserver()
    seen = []

    async def fake_run(row):
        seen.append(row)
        return RunOutcome(503, {"error": "infrastructure_failure", "detail": "x"})

    agent.runtime.run = fake_run  # type: ignore[method-assign]
    row = {"responses_create_params": {"input": "hi"}, "data_source": "prorl_math", "task_id": "t"}
    with TestClient(app) as client:
        response = client.post("/run", json=row)
        assert response.status_code == 503
        assert seen[0]["data_source"] == "prorl_math" and seen[0]["task_id"] == "t"
        status = client.get("/v1/status")
        assert status.status_code == 200 and "prorl_math" in status.json()["tasks"]
        assert client.get("/metrics").status_code == 200
        assert client.get("/healthz").json() == {"status": "ok"}  # Gym's liveness, not shadowed
        assert client.post("/process", json={}).status_code == 422  # ProRL's /process: body required


def test_resources_map_and_routes() -> None:
    agent = make_agent()
    assert agent.resources_map() == {"prorl_math": "prorl_math"}
    paths = {getattr(r, "path", None) for r in agent.setup_webserver().router.routes}
    assert {"/run", "/v1/responses", "/aggregate_metrics"} <= paths


def test_run_answers_infrastructure_failures_as_masked_results_for_nemo_rl_sync() -> None:
    from nemo_gym.openai_utils import NeMoGymResponse

    from nemo_gym_prorl.integrations.gym.contract import check_result

    agent = make_agent()
    agent.config.infrastructure_failures = "masked_result"
    app = agent.setup_webserver()
    outcomes = [RunOutcome(503, {"error": "infrastructure_failure", "detail": "seed failed"}),
                RunOutcome(400, {"error": "unknown_task", "detail": "no such task"})]  # fmt: skip

    async def fake_run(row):
        return outcomes.pop(0)

    agent.runtime.run = fake_run  # type: ignore[method-assign]
    row = {
        "responses_create_params": {"input": "hi", "temperature": 1.0, "top_p": 1.0},
        "data_source": "prorl_math",
    }
    with TestClient(app) as client:
        masked = client.post("/run", json=row)
        assert masked.status_code == 200
        body = masked.json()
        assert check_result(body) == [] and body["instance_config"]["mask_sample"] is True
        assert body["failure_kind"] == "provider_unavailable" and "seed failed" in body["failure_reason"]
        NeMoGymResponse.model_validate(body["response"])  # Gym accepts the response object
        assert client.post("/run", json=row).status_code == 400  # data errors keep their status


def test_run_reads_capture_rollout_id_only_when_the_gym_version_sends_it() -> None:
    agent = make_agent()
    app = agent.setup_webserver()
    seen = []

    async def fake_run(row):
        seen.append(row)
        return RunOutcome(200, {"ok": True})

    agent.runtime.run = fake_run  # type: ignore[method-assign]
    row = {"responses_create_params": {"input": "hi"}, "data_source": "prorl_math"}
    with TestClient(app) as client:
        assert client.post("/run", json=row).status_code == 200  # the pinned Gym sends no capture id
        assert client.post("/run", json={**row, "capture_rollout_id": "r-7"}).status_code == 200
    assert "_ng_rollout_id" not in seen[0] and seen[1]["_ng_rollout_id"] == "r-7"


def test_the_shipped_config_runs_in_process_and_ray_is_one_override_away() -> None:
    shipped = OmegaConf.load(Path(__file__).resolve().parents[1] / "configs" / "prorl_agent.yaml")
    entry = OmegaConf.to_container(shipped.prorl_agent.responses_api_agents.prorl_agent)
    base = {**entry, "host": "127.0.0.1", "port": 0, "name": "prorl_agent"}
    assert ProRLAgentConfig.model_validate(base).executor.kind == "inprocess"
    ray = ProRLAgentConfig.model_validate({**base, "executor": {"kind": "ray", "ray": {"slots_per_node": 8}}})
    assert ray.executor.kind == "ray" and ray.executor.ray.slots_per_node == 8
    with pytest.raises(ValidationError, match=r"executor\.kind"):
        ProRLAgentConfig.model_validate({**base, "executor": {"kind": "slurm"}})
