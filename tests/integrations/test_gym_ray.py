# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The Gym agent with `executor.kind=ray`: its stages run on a rollout actor on every node of a
real local Ray cluster (two raylets on this machine), each reaching a real math resources server
over HTTP through Gym's own client rebuilt from config, and a model backend (a scripted fake
vLLM on loopback: a test double, never a default).

What it shows: rows are placed on both nodes and keep their node through INIT, RUN and EVAL; a
tool call made on a node runs in the resources server's sandbox; a failure raised on a node
keeps its class (infrastructure -> 503) when it reaches `/run`; closing the agent leaves no
rollout actor behind. On the same cluster, Gym's observability sees a rollout run on a node's
actor as it sees one run in process.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import socket
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from unittest.mock import MagicMock

import pytest
import uvicorn
from fastapi import FastAPI
from fastapi.responses import JSONResponse
from nemo_gym.rollout_observability import TrajectoryRecord
from nemo_gym.server_utils import ServerClient
from support.fake_llm import FakeLLM, detokenize
from support.gym_fakes import FakeResources
from support.processes import wait_dead
from support.ray_cluster import two_node_cluster

from nemo_gym_prorl.integrations.gym.config import ProRLAgentSettings, ResolvedModelAccess
from nemo_gym_prorl.integrations.gym.runtime import ProRLGymRuntime, is_loopback_url
from nemo_gym_prorl.integrations.gym.transport import GymServerClient
from nemo_gym_prorl.llm.access import LLMConfig
from nemo_gym_prorl.pipeline import PipelineConfig
from nemo_gym_prorl.pipeline.executors import ExecutorConfig
from nemo_gym_prorl.pipeline.ray_config import RayExecutorConfig
from nemo_gym_prorl.pipeline.ray_executor import RayExecutor
from nemo_gym_prorl.sandbox import SandboxSpec
from resources_servers.prorl_math.app import ProRLMathConfig, ProRLMathServer

ray = pytest.importorskip("ray")
pytestmark = [pytest.mark.slow, pytest.mark.bwrap, pytest.mark.timeout(300)]

CALL = '<tool_call>\n{"name": "ipython", "arguments": {"code": "print(6 * 7)"}}\n</tool_call>'


def compute_then_answer(prompt: list[int]) -> str:
    """First turn: compute with the tool; once a tool answer is in the prompt: answer."""
    return "So the answer is \\boxed{42}." if "<|im_start|>tool" in detokenize(prompt) else CALL


def row(data_source: str = "prorl_math", task_id: str = "t1") -> dict[str, Any]:
    tool = {"type": "function", "name": "ipython", "description": "run python", "strict": False,
            "parameters": {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]}}  # fmt: skip
    return {
        "responses_create_params": {"input": [{"role": "user", "content": "What is 6 * 7?"}], "tools": [tool],
                                    "temperature": 1.0, "top_p": 1.0, "max_output_tokens": 256},
        "data_source": data_source, "task_id": task_id, "expected_answer": "42",
    }  # fmt: skip


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    """Two raylets on this machine."""
    with two_node_cluster() as c:
        yield c


@contextlib.asynccontextmanager
async def served(app: Any) -> AsyncIterator[int]:
    """`app` on a loopback port in this event loop; yields the port."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="critical", timeout_graceful_shutdown=1))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:  # noqa: ASYNC110 (uvicorn exposes a flag, not an event)
        await asyncio.sleep(0.01)
    try:
        yield sock.getsockname()[1]
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 30)
        sock.close()


@pytest.fixture
async def math_server() -> AsyncIterator[int]:
    # Kernel sockets live in the workspace: its path must stay short (Unix sockets).
    with tempfile.TemporaryDirectory(prefix="gr", dir="/tmp") as root:
        config = ProRLMathConfig(
            host="127.0.0.1", port=0, entrypoint="app.py", name="prorl_math", domain="math",
            sandbox=SandboxSpec(root_dir=Path(root)),
        )  # fmt: skip
        server = ProRLMathServer(config=config, server_client=MagicMock(spec=ServerClient))
        async with served(server.setup_webserver()) as port:
            yield port


@pytest.fixture
async def failing_seed_server() -> AsyncIterator[int]:
    """A resources server that passes every row at submit (`/check_instance`) and then fails to
    seed it (503): a failure only a node's stage can meet."""
    app = FastAPI()

    @app.post("/check_instance")
    async def check() -> dict[str, bool]:
        return {"ok": True}

    @app.post("/seed_session")
    async def seed() -> JSONResponse:
        return JSONResponse({"detail": "out of sandboxes"}, status_code=503)

    async with served(app) as port:
        yield port


def gym_config(math_port: int, dead_port: int) -> dict[str, Any]:
    """The global config an `ng_run` would hold: where each resources server listens."""

    def entry(port: int) -> dict[str, Any]:
        return {"resources_servers": {"prorl_math": {"host": "127.0.0.1", "port": port, "entrypoint": "app.py",
                                                     "domain": "math"}}}  # fmt: skip

    return {"prorl_math": entry(math_port), "prorl_dead": entry(dead_port)}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_rows_run_on_every_node_and_failures_keep_their_class(
    cluster: Any, math_server: int, failing_seed_server: int
) -> None:
    model = await FakeLLM(responder=compute_then_answer).start()
    clients = functools.partial(
        GymServerClient.from_config,
        {"host": "127.0.0.1", "port": free_port()},
        gym_config(math_server, failing_seed_server),
        connection_retries=2,
    )
    settings = ProRLAgentSettings(
        pipeline=PipelineConfig(init_workers=4, run_workers=4, eval_workers=4, active_time_s=120),
        executor=ExecutorConfig(
            kind="ray", ray=RayExecutorConfig(slots_per_node=2, health_interval_s=0.5, node_timeout_s=20)
        ),
    )
    access = ResolvedModelAccess(
        LLMConfig(backends=[model.url], dialect="vllm", model="m", health_path=None), "backends"
    )
    runtime = ProRLGymRuntime(
        settings, {"prorl_math": "prorl_math", "prorl_dead": "prorl_dead"}, clients, access
    )
    actors: list[int] = []
    try:
        await runtime.start()
        executor = runtime.pipeline.executor
        assert isinstance(executor, RayExecutor)
        actors = executor.actor_pids()
        node_ids = {n.node_id for n in cluster.list_all_nodes()}
        assert {n.node for n in executor.nodes()} == node_ids

        outcomes = await asyncio.gather(*(runtime.run(row(task_id=f"t{i}")) for i in range(4)))
        assert [o.status for o in outcomes] == [200] * 4, [o.body.get("detail") for o in outcomes]
        for outcome in outcomes:
            body = outcome.body
            assert body["reward"] == 1.0 and not body["mask_sample"], json.dumps(body)[:6000]
            assert body["num_tool_calls"] == 1 and body["tool_errors"] == 0, body["response"]["output"][1]
            # The tool ran in the resources server's sandbox, called from the node's actor.
            outputs = [i for i in body["response"]["output"] if i.get("type") == "function_call_output"]
            assert "42" in outputs[0]["output"]
            (node,) = body["prorl"]["nodes"]  # one attempt, on one node, for all three stages
            assert node in node_ids and body["prorl"]["infra_retries"] == 0
        assert {o.body["prorl"]["nodes"][0] for o in outcomes} == node_ids  # both nodes took rows
        assert sum(n.placed_total for n in executor.nodes()) == 4

        # The node's RolloutFailure (the resources server failing at seed) keeps its class.
        dead = await runtime.run(row("prorl_dead"))
        assert dead.status == 503 and dead.body["error"] == "infrastructure_failure"
        assert "seed_session answered HTTP 503" in dead.body["detail"]
    finally:
        await runtime.close()
        await model.kill()
    assert actors and await asyncio.to_thread(wait_dead, actors) == [], "rollout actors outlived the agent"


async def test_rollouts_run_on_ray_nodes_are_observed_like_local_ones(cluster: Any, tmp_path: Path) -> None:
    """With `executor.kind=ray` the model and tool calls happen on a node's rollout actor: they
    come back with the result, and the agent's `/run` answer and capture carry them as in process."""
    from test_gym_observability import collected, health_of

    capture = tmp_path / "capture"

    def indices(rollout: int) -> dict[str, int]:
        return {"_ng_task_index": 5, "_ng_rollout_index": rollout}

    model = await FakeLLM(responder=compute_then_answer).start()
    settings = ProRLAgentSettings(
        pipeline=PipelineConfig(init_workers=2, run_workers=2, eval_workers=2),
        executor=ExecutorConfig(kind="ray", ray=RayExecutorConfig(slots_per_node=2)),
    )
    access = ResolvedModelAccess(
        LLMConfig(backends=[model.url], dialect="vllm", model="m", health_path=None), "backends"
    )
    runtime = ProRLGymRuntime(
        settings, {"prorl_math": "prorl_math"}, functools.partial(FakeResources, reward=1.0), access,
        model_call_capture_dir=capture,
    )  # fmt: skip
    try:
        outcomes = [await runtime.run({**row(), **indices(r)}) for r in range(2)]
    finally:
        await runtime.close()
        await model.kill()
    assert [o.status for o in outcomes] == [200, 200], [o.body for o in outcomes]
    assert all(o.body["prorl"]["nodes"] for o in outcomes)
    for rollout, outcome in enumerate(outcomes):
        assert len((capture / f"5-{rollout}.capture.jsonl").read_text().splitlines()) == 2
        sent = TrajectoryRecord.model_validate(outcome.body["ng_trajectory"])
        assert [t.tool_name for t in sent.tool_calls] == ["ipython"]
        # The node's tool call was made in the rollout's context too (the fake names it in its reply).
        assert f"in rollout 5-{rollout}" in str(sent.tool_calls[0].output)
    records = [collected(o.body, capture) for o in outcomes]
    assert [(d.verdict, d.unobserved) for d in health_of(records, tmp_path)] == [("healthy", [])] * 2


def test_a_loopback_address_is_only_reachable_on_its_own_node() -> None:
    assert is_loopback_url("http://127.0.0.1:8000") and is_loopback_url("http://localhost:1/v1")
    assert is_loopback_url("http://[::1]:8000")
    assert not is_loopback_url("http://10.0.0.5:8000") and not is_loopback_url("http://gpu-node-3:8000/v1")
