# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The service end to end with the real vLLM-CPU model and real bubblewrap sandboxes:
non-blocking submission and streaming, and a ProRL Agent client session."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import uvicorn
from service_helpers import free_port

from nemo_gym_prorl.llm.embedded import VLLMServer
from nemo_gym_prorl.pipeline.job import JobState
from nemo_gym_prorl.sandbox.leftovers import sandbox_dirs
from nemo_gym_prorl.service import RolloutService
from nemo_gym_prorl.service.client import AsyncRolloutClient
from nemo_gym_prorl.service.config import load_config
from nemo_gym_prorl.service.stack import stack_from_config
from nemo_gym_prorl.tasks.command_output import make_rows

pytestmark = [pytest.mark.vllm, pytest.mark.bwrap]


@pytest.fixture
async def live(real_vllm: VLLMServer, tmp_path: Path) -> AsyncIterator[tuple[str, RolloutService]]:
    """`prorl serve` with the default task domains, in this event loop, on a real socket."""
    config = load_config(
        [
            f"+sandbox.root_dir={tmp_path}",
            "llm.sampling.temperature=0",
            "llm.sampling.max_tokens=40",
            "tasks.command_output.options.agent.max_turns=2",
            "pipeline.init_workers=4",
            "pipeline.run_workers=4",
            "pipeline.eval_workers=4",
        ]
    )
    config.llm.api_key = real_vllm.api_key  # the service alone holds the model server's key
    stack = stack_from_config(config)
    await stack.start()
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(stack.app(), host="127.0.0.1", port=port, log_level="warning"))
    serving = asyncio.create_task(server.serve())
    while not server.started:
        assert not serving.done(), "the service did not start"
        await asyncio.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}", stack.service
    finally:
        server.should_exit = True
        await serving
    assert not sandbox_dirs(tmp_path), "every sandbox is closed when the service stops"


async def test_submitted_rollouts_stream_back_token_exact_with_rewards_and_stage_timings(
    live: tuple[str, RolloutService], real_vllm: VLLMServer
) -> None:
    url, _ = live
    rows = make_rows(4)
    async with AsyncRolloutClient(url, timeout=300) as client:
        await client.add_backend(real_vllm.base_url)
        ids = await client.submit([{"instance": row} for row in rows])
        assert len(ids) == 4 and (await client.get(ids[0])).state in set(JobState)
        results = [r async for r in client.stream(ids, timeout_s=600)]

    assert sorted(r.id for r in results) == sorted(ids)
    for result in results:
        assert result.state == JobState.DONE, (result.error, result.traceback)
        assert result.reward in (0.0, 1.0)
        assert result.timing.init_time > 0 and result.timing.run_time > 0 and result.timing.eval_time > 0
        assert result.timing.counted_elapsed <= result.timing.total_elapsed
        assistant = [m for m in result.trajectory.messages if m["role"] == "assistant"]
        assert assistant, "the model was called"
        for message in assistant:
            assert len(message["generation_token_ids"]) == len(message["generation_log_probs"])
            assert all(lp == lp for lp in message["generation_log_probs"]), "no NaN log-probs"
        for previous, current in itertools.pairwise(assistant):
            history = previous["prompt_token_ids"] + previous["generation_token_ids"]
            assert current["prompt_token_ids"][: len(history)] == history


async def test_a_prorl_agent_client_session_works_unchanged(
    live: tuple[str, RolloutService], real_vllm: VLLMServer
) -> None:
    import httpx

    url, _ = live
    rows = make_rows(3, seed=1)
    async with httpx.AsyncClient(base_url=url, timeout=300) as http:
        assert (await http.post("/add_llm_server", json={"address": real_vllm.base_url})).status_code == 200
        assert (await http.post("/start")).status_code == 200

        async def process(row: dict, job_id: str) -> httpx.Response:
            body = {
                "instance": row,
                "sampling_params": {"temperature": 0, "max_tokens": 32},
                "job_id": job_id,
            }
            return await http.post("/process", json=body)

        running = [asyncio.create_task(process(row, f"prorl-{i}")) for i, row in enumerate(rows)]
        victim = asyncio.create_task(process(make_rows(1, seed=9)[0], "to-cancel"))
        await asyncio.sleep(0.5)
        cancelled = await http.post("/cancel", json={"job_id": "to-cancel"})
        status = (await http.get("/status")).json()
        done = await asyncio.gather(*running)
        victim_reply = await victim

    assert cancelled.status_code == 200
    assert real_vllm.base_url.rstrip("/").removesuffix("/v1") in str(status)
    for reply in done:
        assert reply.status_code == 200
        body = reply.json()
        assert body["success"] and body["critical_error"] is None
        assert body["score"] == body["reward"] and body["reward"] in (0.0, 1.0)
        generated = [m for m in body["messages"] if m["role"] == "assistant"]
        assert generated and all(
            m["token_ids"] and len(m["logprobs"]) == len(m["token_ids"]) for m in generated
        )
        assert set(body["timing"]) >= {"init_time", "run_time", "eval_time", "counted_elapsed"}
    assert victim_reply.json()["state"] == "cancelled"
