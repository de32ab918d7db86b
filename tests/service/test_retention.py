# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The service's memory for finished work is bounded in bytes, and says so.

Finished results past `pipeline.max_retained_bytes` leave memory: a service with a journal still
serves them, read back from it, through every door (GET, wait, stream, cancel); one without
answers 410 naming the budget and the setting to raise. Status and metrics give the retained
bytes, the budgets and the evicted and spilled totals. DAPO batch records are bounded by
`service.max_batch_bytes`: an ended batch past it keeps its stats and answers 410 for its groups.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from service_helpers import Api, MakeApi, make_service
from support.scripted_groups import GroupScriptedHandler
from support.scripted_stages import ScriptedHandler

from nemo_gym_prorl.llm.access import LLMConfig
from nemo_gym_prorl.pipeline import HandlerRegistry, PipelineConfig
from nemo_gym_prorl.service import create_app
from nemo_gym_prorl.service.batch_manager import DatasetCatalog
from nemo_gym_prorl.service.recovery import Durability
from nemo_gym_prorl.service.stack import RolloutStack, StackConfig, build_stack

BUDGET = 50_000  # bytes: two of the padded results below fit, a third does not
PAD = 20_000


def padded(job_id: str) -> dict[str, Any]:
    """A quick job whose result is some 20 kB (its metadata is echoed in the result)."""
    return {"id": job_id, "task": "s", "instance": {"script": {"run_s": 0}}, "metadata": {"pad": "x" * PAD}}


IDS = [f"r{i}" for i in range(5)]


def journaled_stack(path: Path, *, keep_results: int = 10_000) -> RolloutStack:
    def handlers(*_: object) -> HandlerRegistry:
        registry = HandlerRegistry()
        registry.register("s", ScriptedHandler())
        return registry

    config = StackConfig(
        llm=LLMConfig(health_path=None),
        pipeline=PipelineConfig(deadline_check_s=0.05, max_retained_bytes=BUDGET),
        service={"require_backend": False},
        durability=Durability(
            journal=path, keep_results=keep_results, sandbox_root=path.parent / "sandboxes"
        ),
    )
    return build_stack(config, handlers)


@pytest.fixture
async def journaled(tmp_path: Path) -> AsyncIterator[tuple[httpx.AsyncClient, RolloutStack]]:
    async with served(journaled_stack(tmp_path / "journal.sqlite3")) as opened:
        yield opened


class served:
    """A started stack and an HTTP client on its app (ASGI: no socket)."""

    def __init__(self, stack: RolloutStack) -> None:
        self.stack = stack

    async def __aenter__(self) -> tuple[httpx.AsyncClient, RolloutStack]:
        await self.stack.start()
        app = create_app(self.stack.service, manage_lifecycle=False, datasets=DatasetCatalog())
        self.http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t")
        return self.http, self.stack

    async def __aexit__(self, *_: object) -> None:
        await self.http.aclose()
        await self.stack.close()


async def finish_all(http: httpx.AsyncClient) -> None:
    """Run the jobs one after another, each fetched as it finishes: the oldest leave memory first."""
    for job_id in IDS:
        submitted = await http.post("/v1/rollouts", json={"jobs": [padded(job_id)]})
        assert submitted.status_code == 202, submitted.text
        got = await http.get(f"/v1/rollouts/{job_id}", params={"wait_s": 10})
        assert got.json()["state"] == "done"


async def ndjson(http: httpx.AsyncClient, path: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    async with http.stream("POST", path, json=body) as response:
        assert response.status_code == 200
        return [json.loads(line) async for line in response.aiter_lines() if line.strip()]


async def test_results_past_the_byte_budget_are_spilled_and_served_from_the_journal(
    journaled: tuple[httpx.AsyncClient, RolloutStack],
) -> None:
    http, stack = journaled
    await finish_all(http)

    pipeline = (await http.get("/v1/status")).json()["pipeline"]
    assert pipeline["retained_results"] == 2 and pipeline["retained_bytes"] <= BUDGET
    assert pipeline["max_retained_bytes"] == BUDGET and pipeline["max_retained_results"] == 10_000
    assert pipeline["evicted_total"] == 3 and pipeline["spilled_total"] == 3

    # Every door still answers with the whole result.
    first = await http.get("/v1/rollouts/r0")
    assert first.status_code == 200 and first.json()["metadata"]["pad"] == "x" * PAD
    waited = (await http.post("/v1/rollouts/wait", json={"ids": IDS, "timeout_s": 5})).json()
    assert sorted(r["id"] for r in waited["results"]) == IDS
    assert waited["pending"] == [] and waited["missing"] == {}
    lines = await ndjson(http, "/v1/rollouts/stream", {"ids": IDS, "timeout_s": 5})
    assert sorted(line["result"]["id"] for line in lines if line["type"] == "result") == IDS
    assert lines[-1]["type"] == "end" and lines[-1]["pending"] == []
    cancelled = await http.delete("/v1/rollouts/r1")  # finished: answered unchanged
    assert cancelled.status_code == 200 and cancelled.json()["state"] == "done"

    # Sent again under its id (a client retrying a lost answer): still the same finished job.
    again = await http.post("/v1/rollouts", json={"jobs": [padded("r0")]})
    assert again.json()["ids"] == ["r0"] and stack.pipeline.status().live_jobs == 0

    metrics = (await http.get("/metrics")).text
    assert "prorl_results_spilled_total 3.0" in metrics
    assert f"prorl_results_retained_bytes_budget {float(BUDGET)}" in metrics
    assert "prorl_results_retained_bytes " in metrics


async def test_a_restarted_service_serves_results_past_the_budget_from_its_journal(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite3"
    async with served(journaled_stack(path)) as (http, _):
        await finish_all(http)
    async with served(journaled_stack(path)) as (http, stack):
        # Read back only what fits the memory budget; the rest stays in the journal, still served.
        assert stack.recovered is not None
        assert (stack.recovered.restored_results, stack.recovered.evicted_results) == (2, len(IDS) - 2)
        assert stack.pipeline.status().retained_results == 2
        for job_id in IDS:
            got = await http.get(f"/v1/rollouts/{job_id}")
            assert got.status_code == 200 and got.json()["metadata"]["pad"] == "x" * PAD


async def test_a_spilled_result_the_journal_has_pruned_answers_410(tmp_path: Path) -> None:
    async with served(journaled_stack(tmp_path / "journal.sqlite3", keep_results=1)) as (http, _):
        await finish_all(http)
        gone = await http.get("/v1/rollouts/r0")
        assert gone.status_code == 410 and gone.json()["error"] == "evicted"
        assert "pipeline.max_retained_bytes" in gone.json()["reason"]
        assert "journal.keep_results" in gone.json()["reason"]
        waited = (await http.post("/v1/rollouts/wait", json={"ids": ["r0", "r4"], "timeout_s": 5})).json()
        assert [r["id"] for r in waited["results"]] == ["r4"] and list(waited["missing"]) == ["r0"]
        assert waited["pending"] == []


async def test_without_a_journal_a_result_past_the_byte_budget_answers_410_naming_it(
    make_api: MakeApi,
) -> None:
    api: Api = await make_api(max_retained_bytes=BUDGET)
    await finish_all(api.http)
    gone = await api.http.get("/v1/rollouts/r0")
    assert gone.status_code == 410 and gone.json()["error"] == "evicted"
    reason = gone.json()["reason"]
    assert "pipeline.max_retained_bytes" in reason and f"{BUDGET} bytes" in reason
    waited = (await api.http.post("/v1/rollouts/wait", json={"ids": IDS, "timeout_s": 5})).json()
    assert sorted(waited["missing"]) == ["r0", "r1", "r2"]
    assert sorted(r["id"] for r in waited["results"]) == ["r3", "r4"]
    lines = await ndjson(api.http, "/v1/rollouts/stream", {"ids": ["r0"], "timeout_s": 1})
    assert lines[0]["type"] == "missing" and "pipeline.max_retained_bytes" in lines[0]["reason"]
    pipeline = (await api.http.get("/v1/status")).json()["pipeline"]
    assert (pipeline["evicted_total"], pipeline["spilled_total"]) == (3, 0)


# -- DAPO batch records ------------------------------------------------------------------------

BATCH_BUDGET = 15_000  # bytes: one batch's group (its 10 kB row and two samples) fits, two do not


def padded_prompt(key: str) -> dict[str, Any]:
    return {
        "task_id": key,
        "pad": "y" * 10_000,
        "samples": [{"reward": float(k % 2), "run_s": 0.01} for k in range(2)],
    }


@pytest.fixture
async def batches() -> AsyncIterator[httpx.AsyncClient]:
    svc, _ = make_service(GroupScriptedHandler(), service={"max_batch_bytes": BATCH_BUDGET})
    app: FastAPI = create_app(svc, manage_lifecycle=False, datasets=DatasetCatalog())
    await svc.start()
    async with (
        app.router.lifespan_context(app),  # the batch router's own lifespan
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as http,
    ):
        yield http
    await svc.close()


async def stream_batch(http: httpx.AsyncClient, batch_id: str) -> list[dict[str, Any]]:
    async with http.stream("GET", f"/v1/batches/{batch_id}/stream") as response:
        assert response.status_code == 200
        return [json.loads(line) async for line in response.aiter_lines() if line.strip()]


async def test_an_ended_batch_past_the_byte_budget_keeps_its_stats_and_answers_410_for_its_groups(
    batches: httpx.AsyncClient,
) -> None:
    http = batches
    config = {"group_size": 2, "max_prompts_in_flight": 1, "task": "s"}
    rows = [padded_prompt("a"), padded_prompt("b")]
    first = (
        await http.post("/v1/batches", json={"groups": 1, "source": {"rows": rows}, "config": config})
    ).json()
    delivered = await stream_batch(http, first["batch_id"])
    assert [line["type"] for line in delivered][-1] == "end"
    second = (await http.post("/v1/batches", json={"groups": 1, "session_id": first["session_id"]})).json()
    assert len([g for g in await stream_batch(http, second["batch_id"]) if g["type"] == "group"]) == 1

    # The older batch, delivered, made room for the newer one: its stats stay, its groups are gone.
    old = (await http.get(f"/v1/batches/{first['batch_id']}")).json()
    assert old["stats"]["informative_groups"] == 1 and "service.max_batch_bytes" in old["samples_dropped"]
    for path in (
        f"/v1/batches/{first['batch_id']}?include_groups=true",
        f"/v1/batches/{first['batch_id']}/stream",
    ):
        refused = await http.get(path)
        assert refused.status_code == 410 and refused.json()["error"] == "samples_dropped"
        assert "service.max_batch_bytes" in refused.json()["reason"]
    newer = (await http.get(f"/v1/batches/{second['batch_id']}", params={"include_groups": True})).json()
    assert newer["samples_dropped"] is None and len(newer["groups"][0]["samples"]) == 2


async def test_past_service_max_batches_the_oldest_ended_batch_record_is_forgotten() -> None:
    """However long a session runs, its ended batches' records (stats, group summaries) are
    bounded in number as well as in their samples' bytes."""
    svc, _ = make_service(GroupScriptedHandler(), service={"max_batches": 2})
    app: FastAPI = create_app(svc, manage_lifecycle=False, datasets=DatasetCatalog())
    await svc.start()
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as http,
    ):
        config = {"group_size": 2, "max_prompts_in_flight": 1, "task": "s"}
        rows = [padded_prompt(k) for k in "abc"]
        first = (
            await http.post("/v1/batches", json={"groups": 1, "source": {"rows": rows}, "config": config})
        ).json()
        ids = [first["batch_id"]]
        await stream_batch(http, first["batch_id"])
        for _ in range(2):
            more = (
                await http.post("/v1/batches", json={"groups": 1, "session_id": first["session_id"]})
            ).json()
            await stream_batch(http, more["batch_id"])
            ids.append(more["batch_id"])
        assert (await http.get(f"/v1/batches/{ids[0]}")).status_code == 404
        assert [(await http.get(f"/v1/batches/{i}")).status_code for i in ids[1:]] == [200, 200]
    await svc.close()
