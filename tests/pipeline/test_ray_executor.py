# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The Ray executor on a real local Ray cluster (two nodes, a third joins and is killed).

Every node is a real raylet on this machine with `num_cpus=1` declared; the rollout actors open
real bubblewrap sandboxes (the scripted handler's INIT), so "the sandbox is closed" is checked on
real processes. Stage durations are scripted sleeps.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.processes import alive, wait_dead
from support.ray_cluster import exposed, listeners, two_node_cluster

from nemo_gym_prorl.pipeline import JobSpec, JobState
from nemo_gym_prorl.pipeline.ray_executor import RayExecutor
from nemo_gym_prorl.sandbox.leftovers import REAP_INTERVAL_S
from nemo_gym_prorl.service.config import validate_config
from nemo_gym_prorl.service.core import RolloutService
from nemo_gym_prorl.service.metrics import collect, render
from nemo_gym_prorl.service.stack import stack_from_config
from ray_local import add_local_node, node_pids

ray = pytest.importorskip("ray")
pytestmark = [pytest.mark.slow, pytest.mark.bwrap, pytest.mark.timeout(240)]


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    """Two nodes (the head and one worker), one CPU each; a test may add and kill a third."""
    with two_node_cluster() as c:
        yield c


async def _service(tmp_path: Path, **ray_opts: Any) -> tuple[RolloutService, RayExecutor, Path]:
    record = tmp_path / "sandboxes.jsonl"
    config = validate_config(
        {
            "tasks": {
                "box": {
                    "handler": "support.scripted_stages:build_sandbox_scripted",
                    "options": {"record_file": str(record), "run_s": 0.3, "eval_s": 0.1},
                }
            },
            "pipeline": {"init_workers": 8, "run_workers": 8, "eval_workers": 8, "deadline_check_s": 0.05},
            "executor": {
                "kind": "ray",
                "ray": {"slots_per_node": 2, "health_interval_s": 0.5, "node_timeout_s": 10, **ray_opts},
            },
            "service": {"require_backend": False},
            "llm": {"health_path": None},
        }
    )
    stack = stack_from_config(config)
    await stack.start()
    service = stack.service
    executor = service.pipeline.executor
    assert isinstance(executor, RayExecutor)
    return service, executor, record


def _records(path: Path) -> dict[str, dict[str, Any]]:
    if not path.exists():
        return {}
    return {line["job"]: line for line in map(json.loads, path.read_text().splitlines())}


async def test_jobs_spread_over_nodes_and_keep_their_node_through_every_stage(
    cluster: Any, tmp_path: Path
) -> None:
    service, executor, _ = await _service(tmp_path)
    try:
        node_ids = {n.node_id for n in cluster.list_all_nodes()}
        assert {n.node for n in executor.nodes()} == node_ids  # one actor on each node
        ids = service.pipeline.submit([JobSpec(task="box") for _ in range(6)])
        results, pending = await service.pipeline.wait(ids, timeout=120)
        assert pending == []
        assert [r.state for r in results] == [JobState.DONE] * 6, [r.error for r in results]
        # RUN and EVAL found the INIT state on the actor: they ran on the node INIT chose.
        used = {r.attempts[0].node for r in results}
        assert used == node_ids  # least-loaded placement used both nodes
        for r in results:
            assert len(r.attempts) == 1 and r.infra_retries == 0 and r.attempts[0].stage == "eval"
        # 6 jobs over 2 nodes x 2 slots: some waited for a slot, and that was queue time.
        assert max(r.timing.init_wait for r in results) > 0.2
        assert all(r.timing.init_time < 30 for r in results)
        status = service.pipeline.status()
        assert sum(n.placed_total for n in status.nodes) == 6
        assert all(n.in_flight == 0 and n.healthy for n in status.nodes)
        metrics = render(collect(service.pipeline, [], True)).decode()
        for node in node_ids:  # Prometheus series carry the node
            assert f'prorl_node_jobs_placed_total{{node="{node}"}}' in metrics
    finally:
        await service.close()


async def test_every_process_of_the_local_cluster_listens_on_loopback_only(
    cluster: Any, tmp_path: Path
) -> None:
    service, executor, _ = await _service(tmp_path)
    try:
        roots = node_pids(cluster) | set(executor.actor_pids())
        found = listeners(roots)
        assert any("gcs_server" in p for p in found) and sum("raylet" in p for p in found) == 2, found
        assert exposed(roots) == {}, f"reachable beyond this machine: {exposed(roots)}"
    finally:
        await service.close()


async def test_a_turn_waiting_for_a_model_slot_on_its_node_is_not_charged_to_the_job(
    cluster: Any, tmp_path: Path
) -> None:
    # The node's pool is where the turn waits; the job's budget is kept here. The node streams
    # each wait as it begins and ends, and the budget's clock stands still meanwhile.
    service, _, _ = await _service(tmp_path)
    try:
        # A wait longer than the whole budget; the budget still leaves a loaded machine room for
        # the job's own work (a real sandbox opened and closed, actor calls).
        script = {"slot_wait_s": 6.0, "run_s": 0.1}
        (job_id,) = service.pipeline.submit(
            [JobSpec(task="box", instance={"script": script}, budget={"active_time_s": 5.0})]
        )
        (result,), _ = await service.pipeline.wait([job_id], timeout=120)
    finally:
        await service.close()
    assert result.state is JobState.DONE, result.error
    assert result.timing.model_wait_s >= 5.9, "the wait is reported..."
    assert not result.timing.timeout_triggered, "...and not charged to the active budget"


async def test_cancel_reaches_the_actor_and_closes_the_sandbox(cluster: Any, tmp_path: Path) -> None:
    service, executor, record = await _service(tmp_path)
    actors = executor.actor_pids()
    try:
        (job_id,) = service.pipeline.submit(
            [JobSpec(task="box", instance={"script": {"keepalive": True, "run_s": 120}})]
        )
        for _ in range(600):
            if service.pipeline.get(job_id).state is JobState.RUN:
                break
            await asyncio.sleep(0.05)
        keepalive = _records(record)[job_id]["pids"]
        assert keepalive and all(alive(p) for p in keepalive)
        result = await service.pipeline.cancel(job_id)
        assert result.state is JobState.CANCELLED
        assert await asyncio.to_thread(wait_dead, keepalive) == []  # the sandbox's process died
        assert all(n.in_flight == 0 for n in executor.nodes())
    finally:
        await service.close()
    assert await asyncio.to_thread(wait_dead, actors) == [], "rollout actors outlived close()"


async def test_a_node_that_joins_takes_work_and_a_node_killed_mid_run_loses_no_job(
    cluster: Any, tmp_path: Path
) -> None:
    service, executor, record = await _service(tmp_path)
    try:
        assert [n.share_of for n in executor.nodes()] == [2, 2]  # each takes half of the LLM caps
        victim = add_local_node(cluster)  # in the main thread: Ray's node start sets signal handlers
        cluster.wait_for_nodes()
        for _ in range(600):  # the health check finds it and gives it an actor
            if victim.node_id in {n.node for n in executor.nodes()}:
                break
            await asyncio.sleep(0.05)
        else:
            pytest.fail("the node that joined never got a rollout actor")
        await executor.check_nodes()
        assert [n.share_of for n in executor.nodes()] == [3, 3, 3]  # now a third each
        specs = [JobSpec(task="box", instance={"script": {"run_s": 4, "keepalive": True}}) for _ in range(6)]
        ids = service.pipeline.submit(specs)
        for _ in range(600):  # 3 nodes x 2 slots: every job is placed, two of them on the victim
            on_victim = [n.in_flight for n in executor.nodes() if n.node == victim.node_id]
            if on_victim == [2] and all(service.pipeline.get(i).state is JobState.RUN for i in ids):
                break
            await asyncio.sleep(0.05)
        else:
            pytest.fail(f"jobs never all ran: {service.pipeline.status()}")
        await asyncio.to_thread(cluster.remove_node, victim, False)  # SIGKILL its raylet
        results, pending = await service.pipeline.wait(ids, timeout=150)
        assert pending == []
        assert [r.state for r in results] == [JobState.DONE] * 6, [r.error for r in results]
        rerun = [r for r in results if r.infra_retries]
        assert len(rerun) == 2
        for r in rerun:
            first, second = r.attempts
            assert first.node == victim.node_id and first.lost and first.stage == "run"
            assert second.node != victim.node_id and second.lost is None
            assert not r.mask_sample
        status = service.pipeline.status()
        assert status.infra_retries_total == 2
        assert [n.healthy for n in status.nodes if n.node == victim.node_id] == [False]
        # The lost node's share of the LLM caps went back to the two survivors.
        await executor.check_nodes()
        shares = {n.node: n.share_of for n in executor.nodes()}
        assert shares.pop(victim.node_id) is None and list(shares.values()) == [2, 2]
        # The re-runs opened fresh sandboxes elsewhere; the lost ones died with their node.
        lines = [json.loads(line) for line in record.read_text().splitlines()]
        assert len(lines) == 8 and len({line["sandbox"] for line in lines}) == 8
        pids = [p for line in lines for p in line["pids"]]
        # The lost sandboxes' directories are removed by an open on a node of the same machine
        # that has not looked for a dead owner's leftovers within the interval: a re-run's, or
        # at the latest this job's.
        await asyncio.sleep(REAP_INTERVAL_S + 0.2)
        more, pending = await service.pipeline.wait(
            service.pipeline.submit([JobSpec(task="box")]), timeout=60
        )
        assert pending == [] and more[0].state is JobState.DONE
        assert [line["dir"] for line in lines if Path(line["dir"]).exists()] == []
    finally:
        await service.close()
    assert await asyncio.to_thread(wait_dead, pids) == []
