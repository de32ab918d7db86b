# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The DAPO benchmark: asynchronous replenishment against synchronous re-sampling.

Workload: the real pipeline (INIT/RUN/EVAL pools) with scripted generation delays. Each prompt's
G samples have rollout durations drawn from a log-normal (long-tailed, as agentic rollouts
are: most finish fast, a few take many times the median) and 0/1 rewards: about 28% of prompts
always fail, 22% always succeed, the rest succeed with p in [0.25, 0.75]; so about 60% of
groups are uniform (the measured fraction is reported). Every mode sees the same prompts, in
the same order, with the same per-sample durations and rewards.

- sync (NeMo RL's trainer-side dynamic sampling, `grpo.use_dynamic_sampling`): generate a whole
  batch of P prompts x G samples, wait for all of it, keep groups with non-zero std, repeat up
  to `max_gen_batches` until B are cached, train on the first B; the surplus is thrown away.
- async (ours, carry-over): up to M prompts in flight, a new prompt as each group completes,
  unfinished work carried into the next step.
- async with `on_ready: cancel`, for contrast: redundant jobs are cancelled at each step's end.

At every batch close the run counts what was still in flight (unfinished rollouts, finished
rollouts of unfinished groups, judged groups beyond B) and what became of it: carried over to
the next step, cancelled, or discarded; the synchronous baseline has nothing in flight at a close
(it waits for the whole generation batch) and discards the informative groups beyond B.
Simulated: the rollouts themselves (scripted durations and rewards); the pipeline, its worker
pools and the DAPO scheduler are the real ones.

All modes get the same concurrency: P = M prompts, P*G pipeline workers per stage. Each mode
collects STEPS training steps of B informative groups.
"""

from __future__ import annotations

import random
import time
from typing import Any

import provenance  # first: it notes the load average the run starts under
from nemo_gym_prorl.pipeline import HandlerRegistry, JobSpec, Pipeline, PipelineConfig
from nemo_gym_prorl.pipeline.dapo import DapoConfig, DapoScheduler
from nemo_gym_prorl.pipeline.groups import GroupStatus, UniformRule, judge
from nemo_gym_prorl.pipeline.prompt_source import RowsSource
from scripted_handlers import GroupScriptedHandler

G = 4  # samples per prompt
B = 8  # informative groups per training step
STEPS = 4
M = 16  # prompts in flight (async) = prompts per generation batch (sync, batch_multiplier 2)
MAX_GEN_BATCHES = 10  # NeMo RL's default grpo.dynamic_sampling_max_gen_batches
MEDIAN_S, SIGMA, CAP_S = 0.08, 1.0, 2.5  # log-normal rollout duration
SIMULATED = [
    "rollouts: scripted durations (log-normal) and 0/1 rewards, no model and no sandbox "
    "(the pipeline, worker pools and DAPO scheduler are real)",
]
SEED = 9  # a stream whose first prompts are ~60% uniform, as the issue asks (measured value reported)


def make_rows(n: int, seed: int = SEED) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        kind = rng.random()
        p = 0.0 if kind < 0.28 else 1.0 if kind < 0.50 else rng.uniform(0.25, 0.75)
        samples = [
            {
                "run_s": min(CAP_S, rng.lognormvariate(0.0, SIGMA) * MEDIAN_S),
                "reward": 1.0 if rng.random() < p else 0.0,
            }
            for _ in range(G)
        ]
        rows.append({"task_id": f"p{i}", "samples": samples})
    return rows


def uniform_fraction(rows: list[dict[str, Any]]) -> float:
    rule = UniformRule()
    return sum(rule.is_uniform([s["reward"] for s in r["samples"]]) for r in rows) / len(rows)


def _pipeline() -> Pipeline:
    registry = HandlerRegistry()
    registry.register("dapo_bench", GroupScriptedHandler(track=False))
    workers = M * G
    config = PipelineConfig(
        init_workers=workers, run_workers=workers, eval_workers=workers, max_queued=100_000
    )
    return Pipeline(registry, config)


async def run_async(rows: list[dict[str, Any]], on_ready: str, steps: int = STEPS) -> dict[str, Any]:
    pipeline = _pipeline()
    await pipeline.start()
    config = DapoConfig(
        group_size=G, batch_groups=B, max_prompts_in_flight=M, on_ready=on_ready, task="dapo_bench"
    )  # type: ignore[arg-type]
    scheduler = DapoScheduler(pipeline, RowsSource(rows), config)
    step_times = []
    at_close: list[dict[str, int]] = []
    try:
        started = time.monotonic()
        for _ in range(steps):
            t0 = time.monotonic()
            groups, stats = await scheduler.next_batch()
            assert len(groups) == B and all(g.status is GroupStatus.INFORMATIVE for g in groups), stats
            step_times.append(time.monotonic() - t0)
            at_close.append(
                {
                    "carried_prompts": stats.carried_prompts,
                    # carried_finished counts the ready groups' samples too; the rest of the
                    # carried prompts' G samples were still running
                    "carried_unfinished_rollouts": max(
                        0,
                        stats.carried_prompts * G
                        - (stats.carried_finished_rollouts - stats.carried_ready_groups * G),
                    ),
                    "carried_finished_rollouts": stats.carried_finished_rollouts,
                    "carried_ready_groups": stats.carried_ready_groups,
                    "cancelled_rollouts": stats.cancelled_rollouts,
                    "discarded_finished_rollouts": stats.discarded_finished_rollouts,
                }
            )
        elapsed = time.monotonic() - started
        totals = scheduler.totals()
        leftover = await scheduler.close()
    finally:
        await pipeline.stop()
    return {
        "time_s": elapsed,
        "step_times_s": step_times,
        "rollouts_spent": totals["rollouts_spent"],
        "rollouts_per_group": totals["rollouts_spent"] / (steps * B),
        "discarded_finished_rollouts": totals["discarded_finished_rollouts"],
        "cancelled_rollouts": totals["cancelled_rollouts"],
        "prompts_started": totals["prompts_started"],
        "leftover_finished_rollouts_at_close": leftover,
        "in_flight_at_batch_close": at_close,
    }


async def run_sync(rows: list[dict[str, Any]], steps: int = STEPS) -> dict[str, Any]:
    """NeMo RL's `dynamic_sampling`: whole generation batches, filter, repeat, slice to B."""
    pipeline = _pipeline()
    await pipeline.start()
    rule = UniformRule()
    it = iter(rows)
    finished = discarded = gen_batches = prompts = 0
    step_times = []
    try:
        started = time.monotonic()
        for step in range(steps):
            t0 = time.monotonic()
            cache = 0
            for gen in range(1, MAX_GEN_BATCHES + 2):
                if gen > MAX_GEN_BATCHES:
                    raise RuntimeError(f"step {step}: max_gen_batches={MAX_GEN_BATCHES} reached")
                batch = [next(it) for _ in range(M)]
                prompts += len(batch)
                specs = [
                    JobSpec(
                        task="dapo_bench",
                        instance=row,
                        group_id=f"{step}-{gen}-{i}",
                        metadata={"dapo": {"sample": k, "attempt": 0}},
                    )
                    for i, row in enumerate(batch)
                    for k in range(G)
                ]
                results, pending = await pipeline.wait(pipeline.submit(specs), timeout=600)
                assert not pending
                gen_batches += 1
                finished += len(results)
                by_group: dict[str, list[float]] = {}
                for r in results:
                    assert r.reward is not None and r.group_id is not None
                    by_group.setdefault(r.group_id, []).append(r.reward)
                cache += sum(judge(v, rule)[0] is GroupStatus.INFORMATIVE for v in by_group.values())
                if cache >= B:
                    discarded += (cache - B) * G  # informative groups beyond B are sliced away
                    break
            step_times.append(time.monotonic() - t0)
        elapsed = time.monotonic() - started
    finally:
        await pipeline.stop()
    return {
        "time_s": elapsed,
        "step_times_s": step_times,
        "rollouts_spent": finished,
        "rollouts_per_group": finished / (steps * B),
        "discarded_finished_rollouts": discarded,
        "gen_batches": gen_batches,
        "prompts_started": prompts,
    }


async def benchmark(steps: int = STEPS) -> dict[str, Any]:
    rows = make_rows(steps * MAX_GEN_BATCHES * M)
    sync = await run_sync(rows, steps)
    carry = await run_async(rows, "carry_over", steps)
    cancel = await run_async(rows, "cancel", steps)
    return {
        "workload": {
            "group_size": G,
            "groups_per_step": B,
            "steps": steps,
            "prompts_in_flight": M,
            "pipeline_workers_per_stage": M * G,
            "rollout_s": {"lognormal_median": MEDIAN_S, "sigma": SIGMA, "cap": CAP_S},
            "uniform_group_fraction": round(uniform_fraction(rows[: max(sync["prompts_started"], 1)]), 3),
        },
        "async_time_s": round(carry["time_s"], 3),
        "sync_time_s": round(sync["time_s"], 3),
        "speedup": round(sync["time_s"] / carry["time_s"], 2),
        "rollouts_per_group_async": round(carry["rollouts_per_group"], 2),
        "rollouts_per_group_sync": round(sync["rollouts_per_group"], 2),
        "discarded_finished_rollouts": carry["discarded_finished_rollouts"],
        "discarded_finished_rollouts_sync": sync["discarded_finished_rollouts"],
        "sync_gen_batches": sync["gen_batches"],
        "async_step_times_s": [round(t, 3) for t in carry["step_times_s"]],
        "sync_step_times_s": [round(t, 3) for t in sync["step_times_s"]],
        "async_leftover_finished_rollouts_at_close": carry["leftover_finished_rollouts_at_close"],
        "async_cancel_time_s": round(cancel["time_s"], 3),
        "rollouts_per_group_async_cancel": round(cancel["rollouts_per_group"], 2),
        "discarded_finished_rollouts_cancel": cancel["discarded_finished_rollouts"],
        "cancelled_rollouts_cancel": cancel["cancelled_rollouts"],
        "in_flight_at_batch_close_async": _in_flight_totals(carry["in_flight_at_batch_close"]),
        "in_flight_at_batch_close_async_cancel": _in_flight_totals(cancel["in_flight_at_batch_close"]),
        "in_flight_at_batch_close_sync": {"unfinished_rollouts": 0, "note": "waits for the whole batch"},
        "target_met": sync["time_s"] / carry["time_s"] >= 2.0 and carry["discarded_finished_rollouts"] == 0,
        "simulated": SIMULATED,
    }


def _in_flight_totals(closes: list[dict[str, int]]) -> dict[str, int]:
    """Summed over the run's batch closes; the last close's leftovers are counted separately."""
    return {k: sum(c[k] for c in closes) for k in closes[0]} if closes else {}


def format_report(r: dict[str, Any]) -> str:
    w = r["workload"]
    lines = [
        f"DAPO dynamic sampling: {w['steps']} steps x {w['groups_per_step']} informative groups of "
        f"{w['group_size']}; {w['prompts_in_flight']} prompts in flight; "
        f"{w['uniform_group_fraction']:.0%} of groups uniform; rollout durations log-normal "
        f"(median {w['rollout_s']['lognormal_median']}s, sigma {w['rollout_s']['sigma']})",
        f"  sync re-sampling (NeMo RL trainer-side) {r['sync_time_s']:7.2f} s   "
        f"{r['rollouts_per_group_sync']:5.2f} rollouts/group   {r['sync_gen_batches']} generation batches   "
        f"{r['discarded_finished_rollouts_sync']} finished rollouts discarded",
        f"  async replenishment, carry-over         {r['async_time_s']:7.2f} s   "
        f"{r['rollouts_per_group_async']:5.2f} rollouts/group   "
        f"{r['discarded_finished_rollouts']} finished rollouts discarded",
        f"  async replenishment, cancel             {r['async_cancel_time_s']:7.2f} s   "
        f"{r['rollouts_per_group_async_cancel']:5.2f} rollouts/group   "
        f"{r['discarded_finished_rollouts_cancel']} finished rollouts discarded",
        "  in flight at the batch closes (summed over steps): carry-over "
        + _fmt_in_flight(r["in_flight_at_batch_close_async"])
        + "; cancel "
        + _fmt_in_flight(r["in_flight_at_batch_close_async_cancel"])
        + f"; after the last step {r['async_leftover_finished_rollouts_at_close']} finished rollouts were "
        "left unused when the run stopped",
        f"  speedup (sync / async carry-over): {r['speedup']:.2f}x "
        f"(target >= 2x, no finished rollout discarded: {'met' if r['target_met'] else 'NOT met'})",
        f"  rollouts per informative group: async {r['rollouts_per_group_async']:.2f} vs sync "
        f"{r['rollouts_per_group_sync']:.2f} "
        f"({r['rollouts_per_group_sync'] / r['rollouts_per_group_async']:.2f}x fewer with async)",
    ]
    return "\n".join(lines)


def _fmt_in_flight(t: dict[str, int]) -> str:
    return (
        f"{t.get('carried_unfinished_rollouts', 0)} unfinished + {t.get('carried_finished_rollouts', 0)} finished "
        f"rollouts carried, {t.get('cancelled_rollouts', 0)} cancelled, "
        f"{t.get('discarded_finished_rollouts', 0)} finished discarded"
    )


def summary(r: dict[str, Any]) -> str:
    c = r["in_flight_at_batch_close_async"]
    return (
        f"{r['speedup']:.1f}x faster; {r['rollouts_per_group_async']:.2f} vs {r['rollouts_per_group_sync']:.2f} "
        f"rollouts per informative group; finished rollouts discarded: {r['discarded_finished_rollouts']} "
        f"(sync: {r['discarded_finished_rollouts_sync']}); in flight at batch closes: "
        f"{c.get('carried_unfinished_rollouts', 0)} unfinished + {c.get('carried_finished_rollouts', 0)} finished "
        f"carried over, {c.get('cancelled_rollouts', 0)} cancelled; "
        f"{r['async_leftover_finished_rollouts_at_close']} finished left unused when the run stopped"
    )


main = provenance.Benchmark(
    "dapo", lambda say: benchmark(), format_report, summary, SIMULATED,
    ours="async replenishment with carry-over (real pipeline and DAPO scheduler)",
    against="NeMo RL's synchronous batch re-sampling (`use_dynamic_sampling`), same concurrency",
).main  # fmt: skip
