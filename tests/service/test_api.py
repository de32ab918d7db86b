# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The native /v1 API, operations endpoints and error shapes."""

from __future__ import annotations

import json
from typing import Any

from service_helpers import Api, MakeApi, until

from nemo_gym_prorl.pipeline import JobResult
from nemo_gym_prorl.service.models import result_line


def job(**script: Any) -> dict[str, Any]:
    return {"task": "s", "instance": {"script": script} if script else {}}


async def test_submit_returns_ids_at_once_and_results_are_fetchable(api: Api) -> None:
    response = await api.http.post("/v1/rollouts", json={"jobs": [job(run_s=0.2), job(reward=0.25)]})
    assert response.status_code == 202
    ids = response.json()["ids"]
    assert len(ids) == 2
    early = (await api.http.get(f"/v1/rollouts/{ids[0]}")).json()
    assert early["state"] in ("queued", "init", "run", "eval")  # not blocked on the rollout
    done = (await api.http.get(f"/v1/rollouts/{ids[1]}", params={"wait_s": 5})).json()
    assert done["state"] == "done" and done["reward"] == 0.25
    assert set(done["timing"]) >= {
        "init_time",
        "run_time",
        "eval_time",
        "counted_elapsed",
        "timeout_triggered",
    }


async def test_wait_long_polls_and_reports_missing(api: Api) -> None:
    ids = (await api.http.post("/v1/rollouts", json={"jobs": [job(), job(run_s=5)]})).json()["ids"]
    body = {"ids": [*ids, "nope"], "timeout_s": 0.5}
    data = (await api.http.post("/v1/rollouts/wait", json=body)).json()
    assert [r["id"] for r in data["results"]] == [ids[0]]
    assert data["pending"] == [ids[1]] and "nope" in data["missing"]


async def test_stream_is_ndjson_in_completion_order(api: Api) -> None:
    ids = (await api.http.post("/v1/rollouts", json={"jobs": [job(run_s=0.3), job()]})).json()["ids"]
    async with api.http.stream("POST", "/v1/rollouts/stream", json={"ids": [*ids, "gone"]}) as response:
        assert response.headers["content-type"].startswith("application/x-ndjson")
        lines = [json.loads(line) async for line in response.aiter_lines() if line]
    assert [line["type"] for line in lines] == ["missing", "result", "result", "end"]
    assert [line["result"]["id"] for line in lines[1:3]] == [ids[1], ids[0]]
    assert lines[-1]["pending"] == []


async def test_a_streamed_result_is_the_held_json_byte_for_byte_as_streamline_writes_it(api: Api) -> None:
    (job_id,) = (await api.http.post("/v1/rollouts", json={"jobs": [job()]})).json()["ids"]
    async with api.http.stream("POST", "/v1/rollouts/stream", json={"ids": [job_id]}) as response:
        line = next(iter([raw async for raw in response.aiter_lines() if raw]))
    result = JobResult.model_validate(json.loads(line)["result"])
    spliced = result_line(result, api.service.pipeline.held_json(job_id))
    assert spliced == result_line(result) and spliced.decode() == line + "\n"


async def test_delete_cancels_and_releases(api: Api) -> None:
    (job_id,) = (await api.http.post("/v1/rollouts", json={"jobs": [job(run_s=30)]})).json()["ids"]

    async def running() -> bool:
        return (await api.http.get(f"/v1/rollouts/{job_id}")).json()["state"] == "run"

    await until(running)
    response = await api.http.delete(f"/v1/rollouts/{job_id}")
    assert response.status_code == 200 and response.json()["state"] == "cancelled"
    assert not api.handler.live


async def test_errors_have_a_code_and_a_reason(make_api: MakeApi) -> None:
    api = await make_api(max_queued=2, init_workers=1)
    cases = [
        (await api.http.post("/v1/rollouts", json={"jobs": [{"task": "nope"}]}), 400, "unknown_task"),
        (await api.http.post("/v1/rollouts", json={"jobs": []}), 422, "invalid_request"),
        (await api.http.post("/v1/rollouts", content=b"{not json"), 422, "invalid_request"),
        (
            await api.http.post("/v1/rollouts", json={"jobs": [{"task": "s", "priority": "high"}]}),
            422,
            "invalid_request",
        ),
        (await api.http.post("/v1/rollouts", json={"jobs": [job()], "extra": 1}), 422, "invalid_request"),
        (await api.http.get("/v1/rollouts/unknown"), 404, "unknown_job"),
        (await api.http.delete("/v1/rollouts/unknown"), 404, "unknown_job"),
        (await api.http.post("/v1/backends", json={"url": "ftp://x"}), 400, "bad_backend"),
        (await api.http.post("/v1/backends/drain", json={"url": "http://h:1"}), 404, "unknown_backend"),
        (await api.http.delete("/v1/backends", params={"url": "http://h:1"}), 404, "unknown_backend"),
        (await api.http.get("/v1/nothing-here"), 404, "not_found"),
        (await api.http.put("/v1/rollouts"), 405, "method_not_allowed"),
    ]
    await api.http.post("/v1/rollouts", json={"jobs": [{"id": "dup", **job(init_s=5)}]})
    cases.append(
        (
            await api.http.post("/v1/rollouts", json={"jobs": [{"id": "dup", "task": "s"}]}),
            409,
            "duplicate_id",
        )
    )
    cases.append(
        (await api.http.post("/v1/rollouts", json={"jobs": [job(), job(), job()]}), 503, "queue_full")
    )
    for response, status, code in cases:
        body = response.json()
        assert (response.status_code, body["error"]) == (status, code), body
        assert body["reason"]
    assert cases[-1][0].headers["retry-after"] == "1"  # a full queue: retry later, on every door
    assert "priority" in cases[3][0].json()["reason"]


async def test_evicted_results_answer_410(make_api: MakeApi) -> None:
    api = await make_api(max_retained_results=2)
    first = (await api.http.post("/v1/rollouts", json={"jobs": [job()]})).json()["ids"][0]
    await api.http.get(f"/v1/rollouts/{first}", params={"wait_s": 5})
    later = (await api.http.post("/v1/rollouts", json={"jobs": [job(), job()]})).json()["ids"]
    await api.http.post("/v1/rollouts/wait", json={"ids": later, "timeout_s": 5})
    response = await api.http.get(f"/v1/rollouts/{first}")
    assert response.status_code == 410 and response.json()["error"] == "evicted"


async def test_backends_add_drain_remove_and_status(api: Api) -> None:
    unknown = await api.http.post("/v1/backends", json={"url": "gpu01:8000", "options": {"weight": 2}})
    assert unknown.status_code == 400 and "weight" in unknown.json()["reason"]
    added = await api.http.post("/v1/backends", json={"url": "gpu01:8000", "options": {"max_in_flight": 2}})
    assert added.json()["backends"][0]["url"] == "http://gpu01:8000"
    assert added.json()["backends"][0]["options"] == {"max_in_flight": 2}
    await api.http.post("/v1/backends", json={"url": "http://gpu02:8000/"})
    await api.http.post("/v1/backends/drain", json={"url": "http://gpu01:8000"})  # idle: leaves at once
    listed = (await api.http.get("/v1/backends")).json()["backends"]
    assert [b["url"] for b in listed] == ["http://gpu02:8000"]
    await api.http.delete("/v1/backends", params={"url": "gpu02:8000"})
    status = (await api.http.get("/v1/status")).json()
    assert status["backends"] == [] and status["tasks"] == ["s"] and status["accepting"]
    assert set(status["pipeline"]["stages"]) == {"init", "run", "eval"}


async def test_metrics_and_healthz(api: Api) -> None:
    ids = (await api.http.post("/v1/rollouts", json={"jobs": [job(), job(fail="run")]})).json()["ids"]
    await api.http.post("/v1/rollouts/wait", json={"ids": ids, "timeout_s": 5})
    text = (await api.http.get("/metrics")).text
    assert 'prorl_jobs_finished_total{state="done"} 1.0' in text
    assert 'prorl_jobs_critical_errors_total{kind="run"} 1.0' in text
    assert 'prorl_stage_in_flight{stage="run"}' in text and "# TYPE prorl_stage_queued gauge" in text
    assert (await api.http.get("/healthz")).json() == {"status": "ok"}


def test_the_exposition_reads_back_with_prometheus_parser() -> None:
    from prometheus_client.parser import text_string_to_metric_families

    from nemo_gym_prorl.service.metrics import Metric, render

    text = render(
        [Metric("x", "counter", "help", "k", [('a"b', 2.0)]), Metric("y", "gauge", "h", None, [(None, 1.5)])]
    )
    families = {f.name: f for f in text_string_to_metric_families(text.decode())}
    assert families["x"].type == "counter" and families["y"].type == "gauge"
    assert [(s.name, s.labels, s.value) for s in families["x"].samples] == [("x_total", {"k": 'a"b'}, 2.0)]
    assert [(s.name, s.labels, s.value) for s in families["y"].samples] == [("y", {}, 1.5)]


async def test_openapi_schema_lists_the_api(api: Api) -> None:
    schema = (await api.http.get("/openapi.json")).json()
    for path in ("/v1/rollouts", "/v1/rollouts/{job_id}", "/v1/rollouts/wait", "/v1/rollouts/stream",
                 "/v1/backends", "/v1/status", "/metrics", "/healthz", "/process", "/add_llm_server"):  # fmt: skip
        assert path in schema["paths"], path
