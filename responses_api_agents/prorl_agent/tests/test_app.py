# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The agent's HTTP face, built as Gym builds it (a ServerClient over an empty global config + TestClient): /run answers
the runtime's status and body; the rollout API is served by the same app; Gym's liveness stays."""

from __future__ import annotations

from pathlib import Path

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
    client = ServerClient(
        head_server_config=BaseServerConfig(host="127.0.0.1", port=11000),
        global_config_dict=OmegaConf.create({}),
    )
    return ProRLAgent(config=config, server_client=client)


def test_run_answers_the_runtime_outcome() -> None:
    agent = make_agent()
    app = agent.setup_webserver()
    agent.setup_liveness(app)  # as Gym's run_webserver does, after setup_webserver
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


def _endpoints(routes: list) -> dict[tuple[str, frozenset[str]], object]:
    """(path, methods) -> endpoint of every API route, through included routers."""
    from fastapi.routing import APIRoute

    out: dict[tuple[str, frozenset[str]], object] = {}
    for route in routes:
        included = getattr(route, "original_router", None)  # FastAPI mounts the router object itself
        if included is not None:
            prefix = getattr(getattr(route, "include_context", None), "prefix", "") or ""
            out.update({(prefix + p, m): e for (p, m), e in _endpoints(included.routes).items()})
        elif isinstance(route, APIRoute):
            out[(route.path, frozenset(route.methods))] = route.endpoint
    return out


def test_the_rollout_api_is_the_stacks_own_router_mounted_not_copied() -> None:
    agent = make_agent()
    app = agent.setup_webserver()
    router = agent.runtime.stack.router()
    assert router is agent.runtime.stack.router()  # made once
    assert any(getattr(r, "original_router", None) is router for r in app.router.routes)
    served = _endpoints(router.routes)
    mounted = _endpoints(app.router.routes)
    assert {"/v1/rollouts", "/process", "/v1/batches", "/metrics"} <= {path for path, _ in served}
    for key, endpoint in served.items():  # the very endpoint functions the stack's router declares
        assert mounted[key] is endpoint
    # The Gym agent adds only its own routes beside them (Gym keeps its liveness routes).
    own = {path for path, _ in mounted} - {path for path, _ in served}
    assert "/run" in own and "/healthz" not in {path for path, _ in served}


def test_a_full_queue_answers_503_with_retry_after_on_run_as_on_the_rollout_api() -> None:
    from nemo_gym_prorl.pipeline import QueueFullError
    from nemo_gym_prorl.service.errors import as_api_error

    agent = make_agent()
    app = agent.setup_webserver()
    refusal = as_api_error(QueueFullError("full"))
    assert refusal is not None and refusal.status == 503 and refusal.headers == {"Retry-After": "1"}

    async def full(row):
        return RunOutcome(refusal.status, {"error": refusal.code, "detail": "full"}, refusal.headers)

    agent.runtime.run = full  # type: ignore[method-assign]
    agent.config.infrastructure_failures = "http_status"
    row = {"responses_create_params": {"input": "hi"}, "data_source": "prorl_math"}
    with TestClient(app) as client:
        answer = client.post("/run", json=row)
        assert answer.status_code == 503 and answer.headers["retry-after"] == "1"
