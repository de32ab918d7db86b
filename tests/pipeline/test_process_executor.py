# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The process executor: rollouts run in worker processes of this machine, each with its own
event loop, placed and kept as the Ray executor places them on nodes.

The workers are real processes started by a real service stack; their handlers open real
bubblewrap sandboxes (the scripted handler's INIT), so "the sandbox is closed" is checked on
real processes. Stage durations are scripted sleeps.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest
from support.processes import alive, wait_dead

from nemo_gym_prorl.loop_monitor import core_wait_s
from nemo_gym_prorl.pipeline import JobSpec, JobState, stages
from nemo_gym_prorl.pipeline.process_executor import ProcessExecutor
from nemo_gym_prorl.sandbox.threads import SANDBOX_THREADS
from nemo_gym_prorl.service.config import validate_config
from nemo_gym_prorl.service.core import RolloutService
from nemo_gym_prorl.service.metrics import collect, render
from nemo_gym_prorl.service.stack import stack_from_config

pytestmark = [pytest.mark.bwrap, pytest.mark.timeout(240)]

TESTS = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def workers_import_the_test_handlers(monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker builds its handlers from the config's import targets, as the service does: the
    scripted handlers live in the tests' `support` package."""
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")]))
    )


async def _service(tmp_path: Path, **process_opts: Any) -> tuple[RolloutService, ProcessExecutor, Path]:
    record = tmp_path / "sandboxes.jsonl"
    config = validate_config(
        {
            "tasks": {
                "box": {
                    "handler": "support.scripted_stages:build_sandbox_scripted",
                    "options": {"record_file": str(record), "run_s": 0.3, "eval_s": 0.1},
                },
            },
            "pipeline": {"init_workers": 8, "run_workers": 8, "eval_workers": 8, "deadline_check_s": 0.05},
            "executor": {
                "kind": "processes",
                "processes": {"workers": 2, "slots_per_worker": 2, "health_interval_s": 0.3, **process_opts},
            },
            "service": {"require_backend": False},
            "llm": {"health_path": None},
        }
    )  # fmt: skip
    stack = stack_from_config(config)
    await stack.start()
    service = stack.service
    executor = service.pipeline.executor
    assert isinstance(executor, ProcessExecutor)
    return service, executor, record


def _records(path: Path) -> dict[str, dict[str, Any]]:
    if not path.exists():
        return {}
    return {line["job"]: line for line in map(json.loads, path.read_text().splitlines())}


async def test_jobs_spread_over_the_workers_keep_their_worker_and_the_workers_end_with_the_service(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def busy_loop_pace(threshold_s: float | None) -> None:
        await asyncio.sleep(0.01)  # as on a loaded machine: the start pace check always waits

    monkeypatch.setattr(stages, "wait_for_calm_loop", busy_loop_pace)
    service, executor, record = await _service(tmp_path)
    workers = executor.worker_pids()
    try:
        assert len(workers) == 2 and all(alive(p) for p in workers) and os.getpid() not in workers
        assert [n.share_of for n in executor.nodes()] == [2, 2]  # each takes half of the LLM caps
        for pid in workers:  # ...and half of the machine's sandbox threads
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            assert f"PRORL_SANDBOX_THREADS={max(8, SANDBOX_THREADS // 2)}".encode() in environ
        # Each INIT lasts at least 0.3 s, so a job that found every slot taken waited that long.
        slow_init = {"script": {"init_s": 0.3}}
        ids = service.pipeline.submit([JobSpec(task="box", instance=slow_init) for _ in range(6)])
        results, pending = await service.pipeline.wait(ids, timeout=120)
        assert pending == []
        assert [r.state for r in results] == [JobState.DONE] * 6, [r.error for r in results]
        assert {r.attempts[0].node for r in results} == {n.node for n in executor.nodes()}
        for r in results:  # RUN and EVAL found INIT's sandbox on the worker INIT chose
            assert len(r.attempts) == 1 and r.infra_retries == 0 and r.attempts[0].stage == "eval"
        # 6 jobs over 2 workers x 2 slots: two waited for a slot until a whole job (0.3 + 0.3 +
        # 0.1 s of stages) had ended, and that wait was queue time, not INIT's active time.
        longest_waits = sorted(r.timing.init_wait for r in results)[-2:]
        assert min(longest_waits) > 0.6, longest_waits
        # The sandboxes were opened by the workers, not by the service's process.
        lines = _records(record)
        assert {line["opener"] for line in lines.values()} <= set(workers)
        metrics = render(collect(service.pipeline, [], True)).decode()
        for node in executor.nodes():
            assert f'prorl_node_jobs_placed_total{{node="{node.node}"}}' in metrics
        await asyncio.sleep(0.6)  # the workers report their loops' lag every quarter second
        lag_count = _sample(render(collect(service.pipeline, [], True)).decode(),
                            "prorl_worker_event_loop_lag_seconds_count")  # fmt: skip
        assert lag_count > 0
        own_lag_count = _sample(render(collect(service.pipeline, [], True)).decode(),
                                "prorl_worker_event_loop_own_lag_seconds_count")  # fmt: skip
        assert own_lag_count > 0 or core_wait_s() is None  # where the kernel keeps schedstat
    finally:
        await service.close()
    assert await asyncio.to_thread(wait_dead, workers) == [], "worker processes outlived close()"
    sandbox_pids = [p for line in _records(record).values() for p in line["pids"]]
    assert await asyncio.to_thread(wait_dead, sandbox_pids) == []


def _sample(metrics: str, name: str) -> float:
    for line in metrics.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"{name} not in /metrics")


async def test_a_handlers_error_is_the_jobs_error_not_a_lost_worker(tmp_path: Path) -> None:
    service, executor, _ = await _service(tmp_path)
    try:
        (job_id,) = service.pipeline.submit([JobSpec(task="box", instance={"script": {"fail": "run"}})])
        (result,), _ = await service.pipeline.wait([job_id], timeout=60)
        assert result.state is JobState.FAILED and result.critical_error == "run"
        assert result.infra_retries == 0 and "scripted failure" in (result.error or "")
        assert all(n.healthy and n.lost_jobs_total == 0 for n in executor.nodes())
    finally:
        await service.close()


async def test_a_worker_killed_mid_run_loses_no_job_and_is_replaced(tmp_path: Path) -> None:
    service, executor, record = await _service(tmp_path)
    try:
        specs = [JobSpec(task="box", instance={"script": {"run_s": 4, "keepalive": True}}) for _ in range(4)]
        ids = service.pipeline.submit(specs)
        for _ in range(600):  # 2 workers x 2 slots: every job runs
            if all(service.pipeline.get(i).state is JobState.RUN for i in ids):
                break
            await asyncio.sleep(0.05)
        else:
            pytest.fail(f"jobs never all ran: {service.pipeline.status()}")
        victim = executor.nodes()[0].node
        victim_pid = next(w.process.pid for w in executor._workers.values() if w.node_id == victim)
        os.kill(victim_pid, signal.SIGKILL)
        results, pending = await service.pipeline.wait(ids, timeout=150)
        assert pending == []
        assert [r.state for r in results] == [JobState.DONE] * 4, [r.error for r in results]
        rerun = [r for r in results if r.infra_retries]
        assert len(rerun) == 2
        for r in rerun:
            first, second = r.attempts
            assert first.node == victim and first.lost and first.stage == "run"
            assert second.node != victim and second.lost is None and not r.mask_sample
        for _ in range(100):  # the next health check starts a worker in the lost one's place
            live = [n for n in executor.nodes() if n.healthy]
            if len(live) == 2 and victim not in {n.node for n in live}:
                break
            await asyncio.sleep(0.1)
        else:
            pytest.fail(f"the lost worker was not replaced: {executor.nodes()}")
        assert sorted(n.share_of for n in live) == [2, 2]
        more, pending = await service.pipeline.wait(
            service.pipeline.submit([JobSpec(task="box")]), timeout=60
        )
        assert pending == [] and more[0].state is JobState.DONE
    finally:
        await service.close()
    sandbox_pids = [p for line in _records(record).values() for p in line["pids"]]
    assert await asyncio.to_thread(wait_dead, sandbox_pids) == []


async def test_cancel_reaches_the_worker_and_closes_the_sandbox(tmp_path: Path) -> None:
    service, executor, record = await _service(tmp_path)
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
