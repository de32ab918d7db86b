# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""`/v1/batches`: DAPO batches over HTTP (ASGI in-process, and one real socket for the sync client)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from service_helpers import TOKEN, live_server, make_service
from support.scripted_groups import GroupScriptedHandler

from nemo_gym_prorl.service import RolloutService, create_app
from nemo_gym_prorl.service.batch_manager import DatasetCatalog
from nemo_gym_prorl.service.client import AsyncRolloutClient, RolloutClient


def informative(key: str, run_s: float = 0.01) -> dict[str, Any]:
    return {"task_id": key, "samples": [{"reward": float(k % 2), "run_s": run_s} for k in range(2)]}


def uniform(key: str) -> dict[str, Any]:
    return {"task_id": key, "samples": [{"reward": 1.0, "run_s": 0.01}] * 2}


CONFIG = {"group_size": 2, "max_prompts_in_flight": 2, "task": "s"}


def build_app(
    svc: RolloutService, catalog: DatasetCatalog | None = None, *, token: str | None = None
) -> FastAPI:
    return create_app(
        svc, token=token, manage_lifecycle=token is not None, datasets=catalog or DatasetCatalog()
    )


@pytest.fixture
async def api() -> AsyncIterator[tuple[httpx.AsyncClient, RolloutService, GroupScriptedHandler, FastAPI]]:
    svc, handler = make_service(GroupScriptedHandler(), init_workers=8, run_workers=8, eval_workers=8)
    app = build_app(svc)
    await svc.start()
    async with (
        app.router.lifespan_context(app),  # the batch router's own lifespan
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as http,
    ):
        yield http, svc, handler, app  # type: ignore[misc]
    await svc.close()


async def ndjson(http: httpx.AsyncClient, path: str) -> list[dict[str, Any]]:
    async with http.stream("GET", path) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("application/x-ndjson")
        return [json.loads(line) async for line in response.aiter_lines() if line.strip()]


async def test_batch_from_inline_rows_streams_groups_then_end(api: Any) -> None:
    http, *_ = api
    rows = [uniform("u0"), informative("a"), uniform("u1"), informative("b"), informative("c")]
    r = await http.post("/v1/batches", json={"groups": 2, "source": {"rows": rows}, "config": CONFIG})
    assert r.status_code == 202, r.text
    batch_id, session_id = r.json()["batch_id"], r.json()["session_id"]
    lines = await ndjson(http, f"/v1/batches/{batch_id}/stream")
    kinds = [line["type"] for line in lines]
    assert kinds.count("group") == 2 and kinds[-1] == "end" and "dropped" in kinds
    groups = [line["group"] for line in lines if line["type"] == "group"]
    assert all(len(g["samples"]) == 2 and g["status"] == "informative" for g in groups)
    end = lines[-1]["stats"]
    assert end["status"] == "complete" and end["informative_groups"] == 2 and end["uniform_groups"] >= 1
    assert end["rollouts_per_informative_group"] == pytest.approx(end["rollouts_spent"] / 2)
    # Replayed in full to a late reader; GET gives the groups on request.
    assert await ndjson(http, f"/v1/batches/{batch_id}/stream") == lines
    info = (await http.get(f"/v1/batches/{batch_id}", params={"include_groups": True})).json()
    assert info["status"] == "complete" and len(info["groups"]) == 2 and info["dropped"]
    assert (await http.get(f"/v1/batches/{batch_id}")).json()["groups"] is None
    session = (await http.get(f"/v1/batch_sessions/{session_id}")).json()
    assert session["batches"] == [batch_id] and session["totals"]["informative_groups"] == 2


async def test_session_continues_with_carried_work(api: Any) -> None:
    http, *_ = api
    rows = [informative("slow", run_s=0.3)] + [informative(f"i{i}") for i in range(10)]
    first = (
        await http.post("/v1/batches", json={"groups": 2, "source": {"rows": rows}, "config": CONFIG})
    ).json()
    sid = first["session_id"]
    busy = await http.post("/v1/batches", json={"session_id": sid})
    assert busy.status_code == 409 and busy.json()["error"] == "batch_running"
    done = (await http.get(f"/v1/batches/{first['batch_id']}", params={"wait_s": 5})).json()
    assert done["status"] == "complete" and done["stats"]["carried_prompts"] >= 1
    refix = await http.post("/v1/batches", json={"session_id": sid, "source": {"rows": rows}})
    assert refix.status_code == 409 and refix.json()["error"] == "session_exists"
    await asyncio.sleep(0.35)  # the straggler finishes between batches
    second = (await http.post("/v1/batches", json={"session_id": sid, "groups": 3})).json()
    lines = await ndjson(http, f"/v1/batches/{second['batch_id']}/stream")
    keys = [line["group"]["prompt_key"] for line in lines if line["type"] == "group"]
    assert "e0/slow" in keys and lines[-1]["stats"]["carried_groups_delivered"] >= 1
    assert lines[-1]["stats"]["discarded_finished_rollouts"] == 0


async def test_dataset_by_name_and_request_errors(tmp_path: Path) -> None:
    path = tmp_path / "train.jsonl"
    path.write_text("".join(json.dumps(informative(f"d{i}")) + "\n" for i in range(4)))
    svc, _ = make_service(GroupScriptedHandler())
    app = build_app(svc, DatasetCatalog({"train": path}))
    await svc.start()
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as http:
            r = await http.post(
                "/v1/batches", json={"groups": 2, "source": {"dataset": "train"}, "config": CONFIG}
            )
            assert r.status_code == 202
            info = (await http.get(f"/v1/batches/{r.json()['batch_id']}", params={"wait_s": 5})).json()
            assert info["status"] == "complete" and info["stats"]["source"]["index"] >= 2
            missing = await http.post("/v1/batches", json={"source": {"dataset": "nope"}})
            assert missing.status_code == 404 and "train" in missing.json()["reason"]
            both = await http.post("/v1/batches", json={"source": {"dataset": "train", "rows": [{}]}})
            assert both.status_code == 422
            nosrc = await http.post("/v1/batches", json={"groups": 1})
            assert nosrc.status_code == 422 and nosrc.json()["error"] == "source_required"
            assert (await http.get("/v1/batches/batch-nope")).status_code == 404
            assert (await http.get("/v1/batch_sessions/nope")).status_code == 404
            # No path may be given: the server reads only its catalog.
            sneaky = await http.post("/v1/batches", json={"source": {"path": "/etc/passwd"}})
            assert sneaky.status_code == 422
    finally:
        await svc.close()


async def test_cancel_batch_and_close_session(api: Any) -> None:
    http, svc, handler, _ = api
    rows = [informative(f"s{i}", run_s=5.0) for i in range(4)]
    start = (
        await http.post("/v1/batches", json={"groups": 2, "source": {"rows": rows}, "config": CONFIG})
    ).json()
    for _ in range(100):
        if handler.live:
            break
        await asyncio.sleep(0.02)
    t0 = time.monotonic()
    r = await http.delete(f"/v1/batches/{start['batch_id']}", params={"inflight": "cancel"})
    assert r.status_code == 200 and time.monotonic() - t0 < 3
    assert r.json()["status"] == "cancelled" and r.json()["stats"]["cancelled_rollouts"] == 4
    assert not handler.live and svc.pipeline.status().live_jobs == 0
    # A carried-over cancel keeps the jobs; closing the session ends them.
    again = (await http.post("/v1/batches", json={"session_id": start["session_id"], "groups": 1})).json()
    await asyncio.sleep(0.05)
    kept = (await http.delete(f"/v1/batches/{again['batch_id']}", params={"inflight": "carry_over"})).json()
    assert kept["stats"]["carried_prompts"] == 2 and svc.pipeline.status().live_jobs == 4
    closed = await http.delete(f"/v1/batch_sessions/{start['session_id']}")
    assert closed.status_code == 200 and svc.pipeline.status().live_jobs == 0
    assert (await http.get(f"/v1/batch_sessions/{start['session_id']}")).status_code == 404


async def test_shutdown_closes_sessions_before_the_pipeline() -> None:
    svc, handler = make_service(GroupScriptedHandler())
    app = build_app(svc)
    await svc.start()
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as http,
    ):
        rows = [informative(f"s{i}", run_s=5.0) for i in range(2)]
        await http.post("/v1/batches", json={"groups": 1, "source": {"rows": rows}, "config": CONFIG})
        await asyncio.sleep(0.05)
        assert handler.live
    assert not handler.live and svc.pipeline.status().live_jobs == 0  # router lifespan ended them
    await svc.close()


async def test_async_client_mixin(api: Any) -> None:
    _, _, _, app = api

    async with AsyncRolloutClient("http://t", transport=httpx.ASGITransport(app=app)) as client:
        rows = [informative(f"i{i}") for i in range(6)]
        batch = await client.start_batch(groups=2, source={"rows": rows}, config=CONFIG)
        events = [e async for e in client.stream_batch(batch.batch_id)]
        assert [e.type for e in events] == ["group", "group", "end"]
        more = await client.start_batch(groups=1, session_id=batch.session_id)
        done = await client.get_batch(more.batch_id, wait_s=5, include_groups=True)
        assert done.status == "complete" and done.groups and len(done.groups) == 1
        assert (await client.batch_session(batch.session_id)).totals["informative_groups"] == 3
        assert await client.close_batch_session(batch.session_id) >= 0


@pytest.fixture
def live_url() -> Iterator[str]:
    """The app on a real socket, with a token (sync client test)."""
    svc, _ = make_service(GroupScriptedHandler())
    with live_server(svc, token=TOKEN) as url:
        yield url


def test_sync_client_mixin_over_a_socket_with_auth(live_url: str) -> None:
    assert httpx.post(f"{live_url}/v1/batches", json={}).status_code == 401
    with RolloutClient(live_url, token=TOKEN) as client:
        rows = [uniform("u"), informative("a"), informative("b")]
        batch = client.start_batch(groups=2, source={"rows": rows}, config=CONFIG)
        events = list(client.stream_batch(batch.batch_id))
        assert [e.type for e in events if e.type != "dropped"] == ["group", "group", "end"]
        assert events[-1].stats is not None and events[-1].stats.status == "complete"
        assert client.cancel_batch(batch.batch_id).status == "complete"  # already over: unchanged
        with pytest.raises(Exception, match="404"):
            list(client.stream_batch("batch-unknown"))
