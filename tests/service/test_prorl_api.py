# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""A ProRL-style client session against the ProRL-compatible endpoints."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

from service_helpers import MakeApi, until

import nemo_gym_prorl


def instance(**script: Any) -> dict[str, Any]:
    return {"data_source": "s", "instance_id": "django__django-1", "script": script}


async def test_prorl_session(make_api: MakeApi) -> None:
    api = await make_api(service={"require_backend": True})
    http = api.http
    # No LLM server yet: 503, as ProRL answers.
    refused = await http.post("/process", json={"instance": instance(), "sampling_params": {}})
    assert refused.status_code == 503 and refused.json()["error"] == "no_backend"
    # ...but a request for an unknown task is a client error first, whatever the backends.
    unknown = await http.post("/process", json={"instance": {"data_source": "chess"}, "sampling_params": {}})
    assert unknown.status_code == 400 and unknown.json()["error"] == "unknown_task"
    assert (await http.post("/start")).status_code == 503

    assert (await http.post("/add_llm_server", json={"address": "127.0.0.1:9001"})).json()["status"] == "ok"
    await http.post("/add_llm_server", json={"address": "http://127.0.0.1:9002"})
    assert (await http.post("/start")).json()["message"] == "started"
    status = (await http.get("/status")).json()
    assert status["running"] and status["num_llm_servers"] == 2

    # Concurrent blocking /process calls, each gets its own rollout back.
    calls = [
        http.post(
            "/process", json={"instance": instance(reward=i / 10), "sampling_params": {"temperature": 1.0}}
        )
        for i in range(6)
    ]
    long_call = asyncio.create_task(
        http.post(
            "/process", json={"instance": instance(run_s=30), "job_id": "long-one", "sampling_params": {}}
        )
    )
    replies = await asyncio.gather(*calls)
    assert sorted(r.json()["reward"] for r in replies) == [i / 10 for i in range(6)]
    body = replies[0].json()
    assert body["success"] and body["finish"] and body["end_properly"] and body["critical_error"] is None
    assert body["instance_id"] == "django__django-1" and body["score"] == body["reward"]
    assert set(body["timing"]) >= {"init_time", "run_time", "eval_time", "others_time", "counted_elapsed"}
    assert isinstance(body["messages"], list) and body["filter"] is False

    # Cancel a running /process: its caller gets the cancelled result.
    await until(lambda: api.service.pipeline.get("long-one").state.value == "run")
    cancelled = await http.post("/cancel", json={"job_id": "long-one"})
    assert cancelled.json()["state"] == "cancelled"
    long_reply = (await long_call).json()
    assert long_reply["state"] == "cancelled" and not long_reply["success"] and long_reply["filter"]

    # Unknown task: 400; per-request timeout: 504 and the job is cancelled.
    unknown = await http.post("/process", json={"instance": {"data_source": "nope"}})
    assert unknown.status_code == 400 and "unknown task 'nope'" in unknown.json()["reason"]
    slow = await http.post(
        "/process", json={"instance": instance(run_s=30), "job_id": "slow", "timeout": 0.3}
    )
    assert slow.status_code == 504 and slow.json()["error"] == "timeout"
    assert api.service.pipeline.get("slow").state.value == "cancelled"

    # Stop: refuses new work (503) and cancels what is in flight.
    (job_id,) = (
        await http.post("/v1/rollouts", json={"jobs": [{"task": "s", "instance": instance(run_s=30)}]})
    ).json()["ids"]
    assert "cancelled 1" in (await http.post("/stop")).json()["message"]
    assert api.service.pipeline.get(job_id).state.value == "cancelled"
    assert (await http.post("/process", json={"instance": instance()})).status_code == 503
    assert not (await http.get("/status")).json()["running"]

    await http.post("/clear_llm_server")
    assert (await http.get("/status")).json()["llm_servers"] == []
    assert not api.handler.live


async def test_failed_rollout_reports_stage_and_traceback(make_api: MakeApi) -> None:
    api = await make_api()
    body = (await api.http.post("/process", json={"instance": instance(fail="eval")})).json()
    assert body["critical_error"] == "eval" and "ScriptFailureError" in body["traceback"]
    assert not body["success"] and body["filter"] and body["score"] == 0.0
    # The traceback names its modules, not where the server is installed.
    assert "<project>/nemo_gym_prorl/pipeline/stages.py" in body["traceback"]
    for root in (Path(nemo_gym_prorl.__file__).parent.parent, Path(sys.prefix), Path.home()):
        assert str(root) not in body["traceback"], root


async def test_client_disconnect_cancels_the_rollout(make_api: MakeApi) -> None:
    api = await make_api()
    call = asyncio.create_task(
        api.http.post("/process", json={"instance": instance(run_s=30), "job_id": "gone"})
    )
    await until(lambda: "gone" in api.handler.live)
    call.cancel()  # the client goes away mid-rollout
    await until(lambda: api.service.pipeline.get("gone").state.value == "cancelled")
    assert "gone" not in api.handler.live


def test_a_masked_sample_is_filtered_in_the_prorl_result() -> None:
    import time

    from nemo_gym_prorl.pipeline.job import JobResult, JobState
    from nemo_gym_prorl.service.models import ProcessResult

    base = {"id": "j", "task": "t", "state": JobState.DONE, "submitted_at": time.time(), "reward": 0.0}
    assert ProcessResult.from_result(JobResult(**base)).filter is False
    masked = JobResult(**base, report={"mask_sample": True, "reason": "infrastructure_error"})
    assert ProcessResult.from_result(masked).filter is True
    failed = JobResult(**{**base, "state": JobState.FAILED, "reward": None})
    assert ProcessResult.from_result(failed).filter is True
