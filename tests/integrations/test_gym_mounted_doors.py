# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The rollout API the Gym agent mounts (`/v1/rollouts`, ProRL's `/process`, `/v1/batches`) is a
door like `prorl serve`'s: a row no stage could run, in any domain, is answered 400
`invalid_instance` naming its field (the same rows and fields as there) at submit, by the real
resources server of its domain (its `/check_instance`, the check `/seed_session` runs), before
anything starts: no model call, no sandbox, no job queued, no batch session. A batch over a
dataset names its first bad row. A server that cannot answer the check is a 503 to retry, never
an unchecked accept; a runnable row still runs through every door."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from nemo_gym.config_types import BaseServerConfig
from nemo_gym.server_utils import ServerClient
from omegaconf import OmegaConf
from support.domain_servers import GYM_NAMES, DomainServers
from support.gym_fakes import FakeResources, ScriptedDialect, scripted_runtime
from support.unrunnable_rows import UNRUNNABLE, row

from nemo_gym_prorl.integrations.gym.config import ProRLAgentSettings
from nemo_gym_prorl.integrations.gym.runtime import ProRLGymRuntime
from nemo_gym_prorl.integrations.gym.transport import ResourcesServerTransport, ResourcesUnavailableError
from responses_api_agents.prorl_agent.app import ProRLAgent, ProRLAgentConfig

RUNNABLE = row("prorl_math", expected_answer="4")
ANSWER = "2 + 2 = \\boxed{4}"
# One informative group is never reached (every sample is right): the batch ends when its one
# prompt is spent, which is all a test of the door needs.
SMALL_BATCH = {"group_size": 2, "batch_groups": 1}


@dataclass
class Door:
    """The Gym agent's app over the four real resources servers, and what would show a start."""

    http: httpx.AsyncClient
    servers: DomainServers
    model: ScriptedDialect
    runtime: ProRLGymRuntime
    datasets: Path

    def dataset(self, name: str, rows: list[Mapping[str, Any]]) -> str:
        (self.datasets / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        return name

    async def nothing_started(self) -> None:
        assert self.model.calls == 0, "a model call was made"
        assert self.servers.open_sessions() == 0 and not self.servers.sandboxes_made(), "a sandbox opened"
        status = (await self.http.get("/v1/status")).json()
        assert status["pipeline"]["submitted_total"] == 0 and status["pipeline"]["live_jobs"] == 0
        assert (await self.http.get("/v1/batch_sessions")).json() == {"sessions": []}


def gym_agent(servers: DomainServers, model: ScriptedDialect) -> ProRLAgent:
    """The agent as Gym builds it (a ServerClient over an empty global config), its runtime over
    the in-process resources servers and the scripted model."""
    config = ProRLAgentConfig(
        host="127.0.0.1", port=0, entrypoint="app.py", name="prorl_agent",
        model_server={"type": "responses_api_models", "name": "policy_model"},
        resources_servers={name: {"type": "resources_servers", "name": name} for name in GYM_NAMES},
        llm={"backends": ["http://127.0.0.1:9"], "health_path": None, "model": "m"},
    )  # fmt: skip
    client = ServerClient(
        head_server_config=BaseServerConfig(host="127.0.0.1", port=11000),
        global_config_dict=OmegaConf.create({}),
    )
    agent = ProRLAgent(config=config, server_client=client)
    settings = ProRLAgentSettings.model_validate(
        config.model_dump(include=set(ProRLAgentSettings.model_fields))
    )
    agent._runtime = scripted_runtime(settings, model, lambda: servers, GYM_NAMES)
    return agent


@pytest.fixture
async def door(
    domains: DomainServers, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Door]:
    # The catalog is read when the router is made; the files are written by each test.
    names = ("mixed", "good")
    monkeypatch.delenv("PRORL_DATASETS_DIR", raising=False)
    monkeypatch.setenv("PRORL_DATASETS", ",".join(f"{n}={tmp_path / n}.jsonl" for n in names))
    model = ScriptedDialect([ANSWER])
    agent = gym_agent(domains, model)
    app = agent.setup_webserver()
    await agent.runtime.start()  # what the app's lifespan does
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://agent") as http:
            yield Door(http, domains, model, agent.runtime, tmp_path)
    finally:
        await agent.runtime.close()


def refusal(answer: httpx.Response) -> str:
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"] == "invalid_instance", answer.text
    return str(answer.json()["reason"])


async def knock(http: httpx.AsyncClient, instance: Mapping[str, Any]) -> dict[str, httpx.Response]:
    """The row through each mounted door."""
    return {
        "/v1/rollouts": await http.post("/v1/rollouts", json={"jobs": [{"instance": instance}]}),
        "/process": await http.post("/process", json={"instance": instance, "sampling_params": {}}),
        "/v1/batches": await http.post(
            "/v1/batches", json={"groups": 1, "source": {"rows": [instance]}, "config": SMALL_BATCH}
        ),
    }


@pytest.mark.parametrize("case", list(UNRUNNABLE))
async def test_a_row_no_stage_could_run_is_refused_at_every_mounted_door_before_anything_starts(
    door: Door, case: str
) -> None:
    instance, field = UNRUNNABLE[case]
    for path, answer in (await knock(door.http, instance)).items():
        assert f"instance.{field}:" in refusal(answer), (path, answer.text)
    assert refusal(answer).startswith("source.rows[0]: ")  # the batch names the row too
    await door.nothing_started()


@pytest.mark.parametrize("case", list(UNRUNNABLE))
async def test_a_dataset_batch_is_refused_at_creation_naming_its_first_bad_row(door: Door, case: str) -> None:
    instance, field = UNRUNNABLE[case]
    name = door.dataset("mixed", [RUNNABLE, RUNNABLE, instance, RUNNABLE, instance])
    answer = await door.http.post("/v1/batches", json={"groups": 1, "source": {"dataset": name}})
    assert refusal(answer).startswith(f"source.dataset 'mixed'[2]: instance.{field}:"), answer.text
    await door.nothing_started()


async def test_a_dataset_line_that_is_not_a_row_is_refused_naming_the_line(door: Door) -> None:
    (door.datasets / "mixed.jsonl").write_text(json.dumps(RUNNABLE) + "\n[1, 2]\n")
    answer = await door.http.post("/v1/batches", json={"groups": 1, "source": {"dataset": "mixed"}})
    assert answer.status_code == 400 and answer.json()["error"] == "invalid_dataset", answer.text
    assert "mixed.jsonl:2" in answer.json()["reason"]
    await door.nothing_started()


async def test_a_resources_server_that_cannot_be_reached_at_submit_is_503_to_retry(door: Door) -> None:
    door.servers.down.add("prorl_math")
    for path, answer in (await knock(door.http, RUNNABLE)).items():
        assert answer.status_code == 503, (path, answer.text)
        assert answer.json()["error"] == "infrastructure_failure", (path, answer.text)
        assert answer.headers["retry-after"] == "1" and "check_instance" in answer.json()["reason"], path
    await door.nothing_started()


async def test_a_runnable_row_runs_through_every_mounted_door(door: Door) -> None:
    answers = await knock(door.http, RUNNABLE)
    door.dataset("good", [RUNNABLE])
    from_dataset = {"groups": 1, "source": {"dataset": "good"}, "config": SMALL_BATCH}
    answers["/v1/batches (dataset)"] = await door.http.post("/v1/batches", json=from_dataset)

    assert answers["/process"].status_code == 200 and answers["/process"].json()["score"] == 1.0
    submitted = answers["/v1/rollouts"]
    assert submitted.status_code == 202, submitted.text
    waited = await door.http.post("/v1/rollouts/wait", json={"ids": submitted.json()["ids"], "timeout_s": 60})
    assert [r["reward"] for r in waited.json()["results"]] == [1.0]
    for path in ("/v1/batches", "/v1/batches (dataset)"):
        assert answers[path].status_code == 202, (path, answers[path].text)
        batch = await door.http.get(f"/v1/batches/{answers[path].json()['batch_id']}", params={"wait_s": 60})
        stats = batch.json()["stats"]
        assert (stats["status"], stats["rollouts_finished"]) == ("exhausted", 2), (path, stats)
    assert door.model.calls == 6  # 1 + 1 + 2 + 2 rollouts, one turn each
    assert door.servers.open_sessions() == 0  # each rollout's sandbox closed at /verify


async def test_a_resources_server_without_the_check_route_leaves_the_check_to_seed_session() -> None:
    """Not one of this project's servers: its rows are accepted at submit, and checked at seed."""
    foreign = ResourcesServerTransport("theirs", FakeResources(fail={"/check_instance": 404}))
    await foreign.check_instance(RUNNABLE)
    down = ResourcesServerTransport("theirs", FakeResources(fail={"/check_instance": "down"}))
    with pytest.raises(ResourcesUnavailableError):
        await down.check_instance(RUNNABLE)
