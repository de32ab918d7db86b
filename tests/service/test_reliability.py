# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Reliability under load: cancel storms, 1,000 jobs at once, concurrent control calls."""

from __future__ import annotations

import asyncio
import gc
import random
import tracemalloc

import httpx
from service_helpers import MakeApi, live_server, make_service
from support.scripted_stages import ScriptedHandler


async def test_cancel_storm_while_jobs_run(make_api: MakeApi) -> None:
    api = await make_api(init_workers=8, run_workers=8, eval_workers=8)
    rng = random.Random(4)
    jobs = [
        {
            "task": "s",
            "instance": {"script": {k: rng.uniform(0, 0.15) for k in ("init_s", "run_s", "eval_s")}},
        }
        for _ in range(150)
    ]
    ids = (await api.http.post("/v1/rollouts", json={"jobs": jobs})).json()["ids"]
    victims = rng.sample(ids, 100)

    async def storm(job_id: str) -> int:
        await asyncio.sleep(rng.uniform(0, 0.4))
        how = rng.choice(["delete", "prorl", "twice"])
        if how == "prorl":
            return (await api.http.post("/cancel", json={"job_id": job_id})).status_code
        first, second = await asyncio.gather(
            api.http.delete(f"/v1/rollouts/{job_id}"),
            api.http.delete(f"/v1/rollouts/{job_id}") if how == "twice" else asyncio.sleep(0, None),
        )
        return max(first.status_code, second.status_code if second is not None else 0)

    codes = await asyncio.gather(*(storm(i) for i in victims))
    assert set(codes) == {200}
    data = (await api.http.post("/v1/rollouts/wait", json={"ids": ids, "timeout_s": 20})).json()
    assert not data["pending"] and not data["missing"]
    states = {r["id"]: r["state"] for r in data["results"]}
    assert set(states.values()) <= {"done", "cancelled"}
    assert all(states[i] == "done" for i in ids if i not in victims)
    assert sum(s == "cancelled" for s in states.values()) > 10  # the storm hit running jobs
    assert not api.handler.live and api.service.pipeline.status().live_jobs == 0
    # The service is unharmed.
    (after,) = (await api.http.post("/v1/rollouts", json={"jobs": [{"task": "s"}]})).json()["ids"]
    assert (await api.http.get(f"/v1/rollouts/{after}", params={"wait_s": 5})).json()["state"] == "done"


async def test_thousand_jobs_at_once_then_memory_stays_bounded(make_api: MakeApi) -> None:
    cap = 1000
    api = await make_api(
        ScriptedHandler(track=False),  # no per-job test history: only the service's memory counts
        init_workers=16,
        run_workers=16,
        eval_workers=16,
        max_retained_results=cap,
        max_evicted_ids=cap,
    )
    pipeline = api.service.pipeline

    async def round_of(n: int) -> list[str]:
        response = await api.http.post("/v1/rollouts", json={"jobs": [{"task": "s"} for _ in range(n)]})
        assert response.status_code == 202
        ids = response.json()["ids"]
        data = (await api.http.post("/v1/rollouts/wait", json={"ids": ids, "timeout_s": 60})).json()
        assert not data["pending"] and len(data["results"]) == n
        return ids

    ids = await round_of(1000)
    for chunk in range(0, 1000, 100):  # every one fetchable by id
        replies = await asyncio.gather(*(api.http.get(f"/v1/rollouts/{i}") for i in ids[chunk : chunk + 100]))
        assert {r.status_code for r in replies} == {200} and {r.json()["state"] for r in replies} == {"done"}

    # Memory: keep pushing rounds of 1,000 through the full store; per-round growth must fall
    # to (near) zero. Early rounds still grow while traced objects replace untraced ones and
    # tables reach their final sizes; a leak of >= 64 bytes per job would never settle.
    tracemalloc.start()
    growth: list[int] = []
    try:
        rounds = [await round_of(1000)]
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(6):
            rounds.append(await round_of(1000))
            gc.collect()
            now = tracemalloc.get_traced_memory()[0]
            growth.append(now - before)
            before = now
            if growth[-1] < 64_000:
                break
    finally:
        tracemalloc.stop()
    assert growth[-1] < 64_000, growth
    status = pipeline.status()
    assert status.retained_results == cap and status.live_jobs == 0
    assert status.evicted_total == 1000 * (len(growth) + 1)
    assert (await api.http.get(f"/v1/rollouts/{rounds[-2][0]}")).status_code == 410  # evicted, remembered
    assert (await api.http.get(f"/v1/rollouts/{ids[0]}")).status_code == 404  # forgotten: ids bounded too


async def test_concurrent_control_calls_get_their_own_replies() -> None:
    svc, handler = make_service(init_workers=4, run_workers=4, eval_workers=4)
    with live_server(svc) as url:
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            jobs = [
                {"id": f"job-{i}", "task": "s", "instance": {"script": {"run_s": 0.05 * (i % 3)}}}
                for i in range(40)
            ]
            await http.post("/v1/rollouts", json={"jobs": jobs})

            async def check_get(i: int) -> None:
                assert (await http.get(f"/v1/rollouts/job-{i}")).json()["id"] == f"job-{i}"

            async def check_cancel(i: int) -> None:
                reply = await http.post("/cancel", json={"job_id": f"job-{i}"})
                assert reply.json()["id"] == f"job-{i}"

            async def check_delete(i: int) -> None:
                assert (await http.delete(f"/v1/rollouts/job-{i}")).json()["id"] == f"job-{i}"

            async def check_add(i: int) -> None:
                reply = await http.post("/add_llm_server", json={"address": f"10.0.0.{i}:8000"})
                assert reply.json()["message"] == f"added http://10.0.0.{i}:8000"

            async def check_process(i: int) -> None:
                body = {"instance": {"data_source": "s", "script": {"reward": i}}, "job_id": f"proc-{i}"}
                reply = (await http.post("/process", json=body)).json()
                assert (reply["job_id"], reply["reward"]) == (f"proc-{i}", i)

            async def check_status(_: int) -> None:
                assert "pipeline" in (await http.get("/status")).json()

            checks = [check_get, check_cancel, check_delete, check_add, check_process, check_status]
            calls = [check(i) for i in range(40) for check in checks]
            random.Random(0).shuffle(calls)
            await asyncio.gather(*calls)
    assert not handler.live
