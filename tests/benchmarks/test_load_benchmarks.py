# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The load benchmarks at tiny sizes: the simulated agent behaves like one, a load level and a
soak report every figure, and a clean run reports no failure and nothing left behind.

Shape and sanity only, never timings."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest


def _agent(bench: Any, **spec: Any) -> tuple[ModuleType, Any]:
    sim = bench("sim_vllm")
    return sim, sim.AgentBackendSpec(**spec).build()


def _prompt(sim: ModuleType, messages: list[dict[str, str]]) -> list[int]:
    return sim._chatml(messages, True)


def _tool_call(reply: str) -> dict[str, Any]:
    return json.loads(reply.split("<tool_call>")[1].split("</tool_call>")[0])


def test_the_simulated_agent_runs_the_command_it_is_asked_for_then_submits_what_it_printed(
    bench: Any,
) -> None:
    sim, agent = _agent(bench, p_correct=1.0)
    system = {"role": "system", "content": 'tools: {"name": "bash"} {"name": "submit"}'}
    user = {"role": "user", "content": "Use the bash tool to run this command: `echo $(( 3 * 11 ))`"}
    first = agent.reply(_prompt(sim, [system, user]))
    assert _tool_call(first) == {"name": "bash", "arguments": {"command": "echo $(( 3 * 11 ))"}}
    assert len(first.encode()) == agent.spec.reply_tokens - 1, "a real-size reply (the end token is the last)"
    history = [system, user, {"role": "assistant", "content": first}, {"role": "tool", "content": "33"}]
    assert _tool_call(agent.reply(_prompt(sim, history))) == {"name": "submit", "arguments": {"answer": "33"}}


def test_the_simulated_agent_uses_the_kernel_where_offered_and_answers_after_its_tool_turns(
    bench: Any,
) -> None:
    sim, agent = _agent(bench, tool_turns=2)
    system = {"role": "system", "content": 'tools: {"name": "ipython"}'}
    history: list[dict[str, str]] = [system, {"role": "user", "content": "What is 6 * 7?"}]
    for _ in range(2):
        reply = agent.reply(_prompt(sim, history))
        assert _tool_call(reply)["name"] == "ipython"
        history += [{"role": "assistant", "content": reply}, {"role": "tool", "content": "42"}]
    assert agent.reply(_prompt(sim, history)).endswith("\\boxed{42}.")


def test_token_ids_are_in_a_real_vocabularys_range(bench: Any) -> None:
    sim, _ = _agent(bench)
    ids = _prompt(sim, [{"role": "user", "content": "hi"}])
    assert min(ids) >= sim.BYTE_BASE, "ids past the range Python keeps as shared small ints, as real ids are"


@pytest.mark.slow
@pytest.mark.bwrap
async def test_a_load_level_reports_every_figure_and_no_service_failure(bench: Any, tmp_path: Path) -> None:
    load = bench("bench_load")
    point = await load.run_level("shell", 8, 16, lambda message: None)
    assert point["finished"] == 16 and point["service_failures"] == 0, point["outcomes"]
    for name in ("event_loop_lag_s", "turn_s", "sandbox_open_s", "sandbox_close_s"):
        assert point[name]["p99"] is not None and point[name]["p99"] > 0, name
    assert point["service_rss_max_bytes"] > 0 and point["host_processes_max"] > 0
    assert point["rollouts_per_s"] > 0
    assert point["service_cpu_s_per_rollout"] > 0 and 0 < point["host_cpu_busy_share"] <= 1
    assert (
        0 < point["loop_thread_on_cpu_share"] <= 1 and 0 <= point["loop_thread_waiting_for_a_core_share"] <= 1
    )
    assert point["gc_pause_s"] is None or point["gc_pause_s"]["max_bucket"] > 0, (
        "passes measured when any ran"
    )
    assert "service CPU" in load.format_point(point)
    # `prorl serve` as users run it: its rollouts in worker processes, every loop measured.
    assert point["worker_processes"] == 2 and point["worker_event_loop_lag_s"]["p99"] is not None
    assert 0 <= point["loop_lag_late_share"] <= 1
    assert "(every loop)" in load.summary({"curve": [point]})
    picture = load.plot({"curve": [point], "cpu_count": 2}, tmp_path / "load.png")
    assert picture.read_bytes().startswith(b"\x89PNG"), "the curve is drawn"


@pytest.mark.slow
@pytest.mark.bwrap
async def test_a_short_soak_reports_its_series_and_leaves_nothing_behind(bench: Any) -> None:
    soak = bench("bench_soak")
    report = await soak.soak(48, 16, lambda message: None)
    assert report["jobs"] >= 48 and report["plain_not_done"] == 0
    assert report["dapo"].get("group", 0) > 0, "DAPO batches ran beside the plain jobs"
    assert len(report["series"]) >= 2 and all(s["rss_bytes"] > 0 for s in report["series"])
    assert report["nothing_left"], report["leftovers"]


def test_a_rollout_whose_tool_calls_failed_is_a_service_failure_named_by_the_first_error(bench: Any) -> None:
    load = bench("bench_load")
    done = {"state": "done", "trajectory": {"stop_reason": "submitted", "tool_errors": 0}}
    assert load._cause(done) == "ok"
    steps = [
        {"is_error": False, "observation": "fine"},
        {"is_error": True, "observation": "bash did not show a prompt"},
    ]
    failed = {"stop_reason": "submitted", "tool_errors": 1, "steps": steps}
    assert load._cause({**done, "trajectory": failed}) == "tool_errors:bash did not show a prompt"
    assert load._cause({"state": "failed", "error": "sandbox did not open"}).startswith("failed:")
