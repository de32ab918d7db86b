# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Every benchmark runs end to end at tiny sizes and reports figures of the right shape.

These check shape and sanity (counts add up, ratios are positive and finite, every simulated
part is named), never timings: figures measured on a shared machine mean nothing in a test."""

from __future__ import annotations

import math
from typing import Any

import pytest

pytestmark = pytest.mark.slow


def _positive(*values: Any) -> bool:
    return all(isinstance(v, (int, float)) and math.isfinite(v) and v > 0 for v in values)


@pytest.mark.bwrap
@pytest.mark.tmux
async def test_tools_benchmark_measures_every_method(bench) -> None:
    tools = bench("bench_tools")
    r = await tools.measure(calls=5)
    assert r["calls"] == 5 and r["simulated"] == []
    for key in ("pty", "tmux_wait_for", "tmux_capture", "subprocess", "ipython", "sandbox_start_close"):
        assert _positive(r[f"{key}_p50_ms"], r[f"{key}_p90_ms"]) and r[f"{key}_p90_ms"] >= r[f"{key}_p50_ms"]
    assert r["tmux_best_p50_ms"] == min(r["tmux_wait_for_p50_ms"], r["tmux_capture_p50_ms"])
    assert _positive(r["speedup_vs_tmux_best"], r["speedup_vs_subprocess"])
    assert not any("paper" in k and "speedup" in k for k in r)  # the paper's figure is context only
    assert "0.42 s" in tools.summary(r) and "tmux at its best" in tools.render(r)


async def test_balancer_benchmark_runs_every_policy(bench) -> None:
    balancer = bench("bench_balancer")
    config = balancer.BenchConfig(trajectories=12, concurrency=4, tito_sessions=1, tito_turns=3)
    r = await balancer.run_benchmark(config)
    assert set(r["policies"]) == {"ours", "prorl_heap", "least_connections", "round_robin"}
    turns = sum(len(t) for t in balancer.make_workload(config))
    for name, p in r["policies"].items():
        assert sum(p["turns_per_backend"]) == turns, name  # every turn was served exactly once
        assert _positive(p["throughput"]) and 0 <= p["sticky_hit_rate"] <= 1
    assert r["policies"]["ours"]["sticky_hit_rate"] == 1.0
    assert r["policies"]["prorl_heap"]["sticky_hit_rate"] == 1.0  # it binds each trajectory
    assert _positive(
        r["speedup_vs_prorl_heap"], r["speedup_vs_least_connections"], r["speedup_vs_round_robin"]
    )
    assert r["simulated"] and any("backends" in part for part in r["simulated"])
    assert "least connections" in balancer.summary(r)


@pytest.mark.bwrap
async def test_pipeline_benchmark_runs_both_sides(bench) -> None:
    pipeline = bench("bench_pipeline")
    r = await pipeline.benchmark(jobs=6, slots=2, scale=0.02, http_round_trips=5)
    assert r["jobs"] == 6 and r["failed_jobs"] == 0
    assert _positive(r["makespan_s"], r["lower_bound_s"], r["coupled_makespan_s"], r["ideal_speedup"])
    assert r["efficiency"] > 0 and r["ideal_speedup"] > 1
    assert r["overhead_per_job_ms"] >= 0 and r["overhead_single_job_ms"] >= 0
    assert r["simulated"] and any("LLM" in part for part in r["simulated"])
    assert "coupled loop" in pipeline.summary(r)


@pytest.mark.bwrap
async def test_eval_benchmark_passes_canonical_and_fails_mutants(bench) -> None:
    ev = bench("bench_eval")
    r = await ev.measure(limit=4, swe=False)
    assert r["humaneval_total"] == 4
    assert r["humaneval_passed"] == r["humaneval_baseline_passed"] == r["humaneval_fresh_sandbox_passed"] == 4
    assert r["humaneval_mutants_failed"] == 4
    assert _positive(r["speedup"], r["humaneval_per_s_ours"], r["humaneval_per_s_baseline"])
    assert "swe_eval_s_per_instance" not in r and ev.SIMULATED == []
    assert "4/4 pass" in ev.summary(r)


async def test_dapo_benchmark_accounts_for_every_rollout_in_flight(bench) -> None:
    dapo = bench("bench_dapo")
    r = await dapo.benchmark(steps=1)
    assert r["workload"]["steps"] == 1 and _positive(r["speedup"])
    assert r["discarded_finished_rollouts"] == 0  # carry-over keeps every finished rollout
    carried = r["in_flight_at_batch_close_async"]
    assert set(carried) >= {"carried_unfinished_rollouts", "carried_finished_rollouts", "cancelled_rollouts"}
    assert carried["cancelled_rollouts"] == 0 and carried["discarded_finished_rollouts"] == 0
    cancel = r["in_flight_at_batch_close_async_cancel"]
    assert cancel["carried_unfinished_rollouts"] == 0 and cancel["carried_finished_rollouts"] == 0
    assert r["discarded_finished_rollouts_cancel"] == cancel["discarded_finished_rollouts"]
    assert r["simulated"] and "in flight at batch closes" in dapo.summary(r)


def test_idle_share_is_the_time_no_request_was_in_flight(bench) -> None:
    clock = bench("bench_real").BusyClock()
    clock.intervals = {"a": [(0.0, 2.0), (1.0, 3.0), (6.0, 8.0)], "b": [(0.0, 10.0)]}
    # a: busy 0-3 and 6-8 of 0-10 (idle 0.5); b: always busy (idle 0); a third never used (idle 1)
    assert clock.idle_share(0.0, 10.0, n_backends=3) == pytest.approx((0.5 + 0.0 + 1.0) / 3)


@pytest.mark.vllm
@pytest.mark.bwrap
async def test_real_benchmark_measures_service_cost_pipeline_and_balancer(bench, real_vllm) -> None:
    real = bench("bench_real")
    config = real.Config(jobs=2, concurrency=2, max_tokens=8, multi_turns=2, servers=1)
    r = await real.measure(
        config, [real_vllm.root_url], real_vllm.spec.served_model_name, lambda _: None, real_vllm.api_key
    )
    assert r["simulated"] == []
    for key in ("single_turn_cold", "single_turn_warm", "multi_turn_cold", "multi_turn_warm"):
        service, direct = r[key]["service"], r[key]["direct"]
        assert service["done"] == 2 and service["generated_tokens"] == direct["generated_tokens"] > 0
        assert service["model_calls"] >= 2 and 0.0 <= service["model_idle_share"] <= 1.0
        assert _positive(r[key]["ratio"])
    assert r["single_turn_warm"]["service"]["model_calls"] == 2  # one model call per single-turn rollout
    assert set(r["balancer"]["policies"]) == {"ours", "least_connections", "prorl_heap"}
    assert _positive(r["pipeline"]["speedup_vs_coupled"], r["balancer"]["speedup_vs_least_connections"])
    assert set(real.summaries(r)) == {"service_cost", "pipeline_real", "balancer_real"}
