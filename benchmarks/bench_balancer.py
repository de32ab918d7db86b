# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""`prorl bench balancer`: our pool vs ProRL's assignment-count heap vs round robin.

Same run, same workload, same simulated backends (fresh per policy, so caches start cold),
same HTTP client settings; only the routing policy differs:
- ours: `LLMBackendPool` (least requests in flight, sticky per trajectory, health-aware);
- prorl_heap: ProRL Agent's policy, a min-heap of (assignments, backend): each trajectory
  takes the least-assigned backend and keeps it; the count never goes down;
- least_connections: every request to the backend with the fewest requests in flight, no
  stickiness (what a plain L7 load balancer does; it loses the backends' prefix caches);
- round_robin: every request to the next backend (no stickiness).
Simulated: the backends (`balancer_sim.py`: token-rate servers with a prefix cache and 1x/1x/2x/4x
slowdowns) and the tool time between turns; the pool, HTTP client and token session are real.
The workload: N multi-turn trajectories (seeded), at most `concurrency` in flight, with tool
time between turns. Also measured: the token session's client overhead per turn against a
direct HTTP call to the same server.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import random
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
from pydantic import BaseModel, Field

import provenance  # first: it notes the load average the run starts under
from balancer_sim import SimBackendSpec, SimulatedBackends
from nemo_gym_prorl.llm.balancer import BalancerConfig
from nemo_gym_prorl.llm.dialects.vllm import VLLMCompletionsDialect
from nemo_gym_prorl.llm.pool import LLMBackendPool, PoolConfig, Route
from nemo_gym_prorl.llm.records import SamplingParams
from nemo_gym_prorl.llm.tito import TokenSession

POLICIES = ("ours", "prorl_heap", "least_connections", "round_robin")
SIMULATED = [
    "LLM backends: simulated token-rate servers with a prefix cache, 1x/1x/2x/4x slowdowns (balancer_sim.py)",
    "tool time between turns: scripted sleeps",
]


class BenchConfig(BaseModel):
    trajectories: int = 512
    concurrency: int = 64
    slowdowns: list[float] = Field(default_factory=lambda: [1.0, 1.0, 2.0, 4.0])
    min_turns: int = 2
    max_turns: int = 8
    seed: int = 0
    tito_sessions: int = 20
    tito_turns: int = 10


class Turn(BaseModel):
    prompt_tokens: int
    new_tokens: int
    gen_tokens: int
    tool_s: float


class PolicyResult(BaseModel):
    policy: str
    wall_s: float
    throughput: float = Field(description="trajectories per second")
    p50_turn_latency_s: float
    p95_turn_latency_s: float
    p95_trajectory_s: float
    sticky_hit_rate: float
    turns_per_backend: list[int]


def make_workload(config: BenchConfig) -> list[list[Turn]]:
    rng = random.Random(config.seed)
    workload = []
    for _ in range(config.trajectories):
        prompt = rng.randint(300, 800)
        turns = []
        for t in range(rng.randint(config.min_turns, config.max_turns)):
            new = prompt if t == 0 else rng.randint(50, 400)
            if t > 0:
                prompt += new
            gen = rng.randint(20, 200)
            turns.append(
                Turn(prompt_tokens=prompt, new_tokens=new, gen_tokens=gen, tool_s=rng.uniform(0.005, 0.05))
            )
            prompt += gen
        workload.append(turns)
    return workload


Send = Callable[[str, dict[str, Any]], Awaitable[str]]  # (trajectory id, body) -> backend used


async def _drive(
    workload: list[list[Turn]], concurrency: int, send: Send, end: Callable[[str], None]
) -> dict[str, Any]:
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(len(workload)):
        queue.put_nowait(i)
    turn_latencies: list[float] = []
    trajectory_times: list[float] = []
    sticky = moved = 0
    per_backend: dict[str, int] = {}

    async def worker() -> None:
        nonlocal sticky, moved
        while not queue.empty():
            i = queue.get_nowait()
            key, previous = f"traj-{i}", None
            started = time.monotonic()
            for turn in workload[i]:
                body = {"trajectory": key, **turn.model_dump(exclude={"tool_s"})}
                t0 = time.monotonic()
                backend = await send(key, body)
                turn_latencies.append(time.monotonic() - t0)
                per_backend[backend] = per_backend.get(backend, 0) + 1
                if previous is not None:
                    sticky += backend == previous
                    moved += backend != previous
                previous = backend
                await asyncio.sleep(turn.tool_s)  # the agent runs its tools
            end(key)
            trajectory_times.append(time.monotonic() - started)

    started = time.monotonic()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return {
        "wall_s": time.monotonic() - started,
        "turns": turn_latencies,
        "trajectories": trajectory_times,
        "sticky": sticky / max(1, sticky + moved),
        "per_backend": per_backend,
    }


def _p(values: list[float], q: float) -> float:
    return (
        statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1] if len(values) > 1 else values[0]
    )


def _client() -> httpx.AsyncClient:
    return httpx.AsyncClient(
        timeout=120, limits=httpx.Limits(max_connections=None, max_keepalive_connections=256)
    )


async def _post(client: httpx.AsyncClient, url: str, body: dict[str, Any]) -> None:
    response = await client.post(url + "/generate", json=body)
    response.raise_for_status()


async def run_policy(
    policy: str, urls: list[str], workload: list[list[Turn]], config: BenchConfig
) -> PolicyResult:
    async with _client() as client:
        if policy == "ours":
            pool = LLMBackendPool(
                PoolConfig(backends=urls, balancer=BalancerConfig(max_in_flight=config.concurrency)),
                client=client,
            )
            await pool.start()
            routes: dict[str, Route] = {}

            async def send(key: str, body: dict[str, Any]) -> str:
                route = routes.setdefault(key, Route(key=key))
                _, reply = await pool.post_json("/generate", body, route=route)
                return reply.backend

            def end(key: str) -> None:
                pool.end_trajectory(routes.pop(key))

            try:
                raw = await _drive(workload, config.concurrency, send, end)
            finally:
                await pool.aclose()
        elif policy == "prorl_heap":
            heap = [(0, i, url) for i, url in enumerate(urls)]
            heapq.heapify(heap)
            bound: dict[str, str] = {}

            async def send(key: str, body: dict[str, Any]) -> str:
                if key not in bound:  # ProRL: least-assigned backend, kept for the whole job
                    count, i, url = heapq.heappop(heap)
                    heapq.heappush(heap, (count + 1, i, url))
                    bound[key] = url
                await _post(client, bound[key], body)
                return bound[key]

            raw = await _drive(workload, config.concurrency, send, lambda key: None)
        elif policy == "least_connections":
            in_flight = dict.fromkeys(urls, 0)

            async def send(key: str, body: dict[str, Any]) -> str:
                url = min(urls, key=lambda u: in_flight[u])  # ties: the first listed
                in_flight[url] += 1
                try:
                    await _post(client, url, body)
                finally:
                    in_flight[url] -= 1
                return url

            raw = await _drive(workload, config.concurrency, send, lambda key: None)
        elif policy == "round_robin":
            cycle = itertools.cycle(urls)

            async def send(key: str, body: dict[str, Any]) -> str:
                url = next(cycle)
                await _post(client, url, body)
                return url

            raw = await _drive(workload, config.concurrency, send, lambda key: None)
        else:
            raise ValueError(f"unknown policy {policy!r}")
    return PolicyResult(
        policy=policy,
        wall_s=raw["wall_s"],
        throughput=len(workload) / raw["wall_s"],
        p50_turn_latency_s=_p(raw["turns"], 50),
        p95_turn_latency_s=_p(raw["turns"], 95),
        p95_trajectory_s=_p(raw["trajectories"], 95),
        sticky_hit_rate=raw["sticky"],
        turns_per_backend=[raw["per_backend"].get(u, 0) for u in urls],
    )


async def measure_tito_overhead(url: str, config: BenchConfig) -> dict[str, float]:
    """Per turn: a token session's turn vs a direct POST of the same completion request.

    The session turn includes everything it does (the delta /tokenize round trip, checks,
    records); `cpu` counts only this process's CPU time, i.e. pure client-side work."""
    messages = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "List files."}]
    tool = {"role": "tool", "content": "a.txt\nb.txt\n" * 20}
    session_wall: list[float] = []
    session_cpu: list[float] = []
    prompts: list[list[int]] = []
    async with _client() as client:
        pool = LLMBackendPool(PoolConfig(backends=[url]), client=client)
        await pool.start()
        dialect = VLLMCompletionsDialect()
        sampling = SamplingParams(temperature=1.0, top_p=1.0, max_tokens=16)
        for s in range(config.tito_sessions):
            session = TokenSession(pool, dialect, model="sim", sampling=sampling, trajectory_id=f"tito-{s}")
            await session.generate(messages)
            for _ in range(config.tito_turns - 1):
                w0, c0 = time.perf_counter(), time.process_time()
                turn = await session.generate([tool])
                session_wall.append(time.perf_counter() - w0)
                session_cpu.append(time.process_time() - c0)
                prompts.append(turn.prompt_token_ids)
            session.close()
        await pool.aclose()
        direct_wall: list[float] = []
        direct_cpu: list[float] = []
        for prompt in prompts:
            body = {
                "model": "sim",
                "prompt": prompt,
                "max_tokens": 16,
                "temperature": 1.0,
                "top_p": 1.0,
                "logprobs": 0,
                "return_token_ids": True,
                "echo": False,
            }
            w0, c0 = time.perf_counter(), time.process_time()
            response = await client.post(url + "/v1/completions", json=body)
            response.json()
            direct_wall.append(time.perf_counter() - w0)
            direct_cpu.append(time.process_time() - c0)
    med = statistics.median
    return {
        "tito_overhead_ms": (med(session_wall) - med(direct_wall)) * 1000,
        "tito_overhead_cpu_ms": (med(session_cpu) - med(direct_cpu)) * 1000,
        "tito_turn_ms": med(session_wall) * 1000,
        "direct_call_ms": med(direct_wall) * 1000,
        "tito_turns_measured": float(len(session_wall)),
    }


async def run_benchmark(
    config: BenchConfig | None = None, *, progress: Callable[[str], None] | None = None
) -> dict[str, Any]:
    config = config or BenchConfig()
    say = progress or (lambda message: None)
    workload = make_workload(config)
    specs = [SimBackendSpec(slowdown=s) for s in config.slowdowns]
    results: dict[str, PolicyResult] = {}
    for policy in POLICIES:
        with SimulatedBackends(specs) as urls:  # fresh backends: every policy starts cold
            say(f"running {policy} ({config.trajectories} trajectories, {len(urls)} backends)")
            results[policy] = await run_policy(policy, urls, workload, config)
            r = results[policy]
            say(
                f"  {policy}: {r.throughput:.2f} traj/s, p95 turn {r.p95_turn_latency_s * 1000:.0f} ms, sticky {r.sticky_hit_rate:.3f}"
            )
    with SimulatedBackends([SimBackendSpec()]) as (url,):
        say("measuring the token session's overhead per turn")
        tito = await measure_tito_overhead(url, config)
    ours, prorl, rr = results["ours"], results["prorl_heap"], results["round_robin"]
    lc = results["least_connections"]
    return {
        "throughput_ours": ours.throughput,
        "throughput_prorl_heap": prorl.throughput,
        "throughput_least_connections": lc.throughput,
        "throughput_round_robin": rr.throughput,
        "speedup_vs_prorl_heap": ours.throughput / prorl.throughput,
        "speedup_vs_least_connections": ours.throughput / lc.throughput,
        "speedup_vs_round_robin": ours.throughput / rr.throughput,
        "p95_latency_ours_s": ours.p95_turn_latency_s,
        "p95_latency_prorl_heap_s": prorl.p95_turn_latency_s,
        "p95_latency_least_connections_s": lc.p95_turn_latency_s,
        "p95_latency_round_robin_s": rr.p95_turn_latency_s,
        "simulated": SIMULATED,
        "sticky_hit_rate": ours.sticky_hit_rate,
        **tito,
        "config": config.model_dump(),
        "policies": {name: r.model_dump() for name, r in results.items()},
    }


def format_report(result: dict[str, Any]) -> str:
    lines = ["policy             traj/s   p95 turn   p95 traj   sticky   turns per backend (1x,1x,2x,4x)"]
    for name, r in result["policies"].items():
        lines.append(
            f"{name:<17} {r['throughput']:7.2f} {r['p95_turn_latency_s'] * 1000:8.0f} ms {r['p95_trajectory_s']:8.2f} s"
            f" {r['sticky_hit_rate']:7.3f}   {r['turns_per_backend']}"
        )
    lines.append(
        f"ours vs ProRL heap: {result['speedup_vs_prorl_heap']:.2f}x throughput (target >= 1.3x); "
        f"vs least connections (no stickiness): {result['speedup_vs_least_connections']:.2f}x; "
        f"vs round robin: {result['speedup_vs_round_robin']:.2f}x"
    )
    lines.append("simulated: " + "; ".join(result["simulated"]))
    lines.append(
        f"sticky hit rate (ours, all backends healthy): {result['sticky_hit_rate'] * 100:.1f}% (target 100%)"
    )
    lines.append(
        f"token session overhead per turn: {result['tito_overhead_ms']:.2f} ms wall "
        f"({result['tito_overhead_cpu_ms']:.2f} ms client CPU) vs a direct call of {result['direct_call_ms']:.2f} ms (target <= 2 ms)"
    )
    return "\n".join(lines)


# One line for the results file and the README table (a template over the figures).
SUMMARY = (
    "{speedup_vs_prorl_heap:.2f}x ProRL's throughput, {speedup_vs_least_connections:.2f}x least "
    "connections, {speedup_vs_round_robin:.2f}x round robin; p95 turn {p95_latency_ours_s:.2f} s vs "
    "{p95_latency_prorl_heap_s:.2f} s (heap), {p95_latency_least_connections_s:.2f} s (least conn.); "
    "{sticky_hit_rate:.0%} sticky; token session {tito_overhead_ms:.1f} ms/turn"
)

summary = SUMMARY.format_map


main = provenance.Benchmark(
    "balancer", lambda say: run_benchmark(BenchConfig(), progress=say), format_report, summary, SIMULATED, show_simulated=False,
    ours="least-in-flight + sticky pool (4 simulated backends at 1x/1x/2x/4x)",
    against="ProRL's assignment heap; least connections without stickiness; round robin",
).main  # fmt: skip
