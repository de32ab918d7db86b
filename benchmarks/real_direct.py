# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""`bench_real`'s baselines: the model calls a service run made, replayed straight at the vLLM
servers (`direct`) and under three routing policies (`balancer_policies`), so that the service's
figures have the same work, minus the service, to be compared with."""

from __future__ import annotations

import asyncio
import heapq
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx

from nemo_gym_prorl.llm.pool import LLMBackendPool, PoolConfig, Route

Sender = Callable[[int, dict[str, Any]], Awaitable[None]]


async def replay(
    turns: list[list[tuple[list[int], int]]], concurrency: int, send: Sender, model: str
) -> dict[str, float]:
    """Each trajectory's model calls in order (a turn waits for the previous one), `concurrency`
    trajectories at once; every call generates exactly the tokens the service's call did."""
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(len(turns)):
        queue.put_nowait(i)

    async def worker() -> None:
        while not queue.empty():
            i = queue.get_nowait()
            for prompt, n in turns[i]:
                body = {
                    "model": model, "prompt": prompt, "max_tokens": n, "min_tokens": n, "temperature": 1.0,
                    "top_p": 1.0, "logprobs": 0, "return_token_ids": True, "echo": False, "seed": i,
                }  # fmt: skip
                await send(i, body)

    started = time.monotonic()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    wall = time.monotonic() - started
    tokens = sum(n for t in turns for _, n in t)
    return {"wall_s": wall, "generated_tokens": tokens, "tokens_per_s": tokens / wall if wall else 0.0}


def _checked(response: httpx.Response, want: int) -> None:
    response.raise_for_status()
    got = len(response.json()["choices"][0]["token_ids"])
    if got != want:
        raise RuntimeError(f"direct call generated {got} tokens, expected {want}")


def _client(api_key: str | None) -> httpx.AsyncClient:
    """Every request carries the servers' key, as the service's pool sends it."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else None
    return httpx.AsyncClient(timeout=600, limits=httpx.Limits(max_connections=256), headers=headers)


async def direct(
    turns: list[list[tuple[list[int], int]]],
    urls: list[str],
    concurrency: int,
    model: str,
    api_key: str | None = None,
) -> dict[str, float]:
    """Trajectory i always on server i mod n (as sticky as the service's pool)."""
    async with _client(api_key) as client:

        async def send(i: int, body: dict[str, Any]) -> None:
            _checked(
                await client.post(urls[i % len(urls)] + "/v1/completions", json=body), body["max_tokens"]
            )

        return await replay(turns, concurrency, send, model)


async def balancer_policies(
    turns: list[list[tuple[list[int], int]]],
    urls: list[str],
    concurrency: int,
    model: str,
    api_key: str | None = None,
) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    async with _client(api_key) as client:
        # ours: the service's pool, sticky per trajectory, least in flight
        pool = LLMBackendPool(PoolConfig(backends=[u + "/v1" for u in urls], api_key=api_key), client=client)
        await pool.start()
        routes: dict[int, Route] = {}

        async def ours(i: int, body: dict[str, Any]) -> None:
            route = routes.setdefault(i, Route(key=f"t{i}"))
            data, _ = await pool.post_json("/v1/completions", body, route=route)
            if len(data["choices"][0]["token_ids"]) != body["max_tokens"]:
                raise RuntimeError("wrong number of generated tokens")

        try:
            out["ours"] = await replay(turns, concurrency, ours, model)
        finally:
            await pool.aclose()

        in_flight = dict.fromkeys(urls, 0)

        async def least_connections(i: int, body: dict[str, Any]) -> None:
            url = min(urls, key=lambda u: in_flight[u])
            in_flight[url] += 1
            try:
                _checked(await client.post(url + "/v1/completions", json=body), body["max_tokens"])
            finally:
                in_flight[url] -= 1

        out["least_connections"] = await replay(turns, concurrency, least_connections, model)

        heap = [(0, k, u) for k, u in enumerate(urls)]
        heapq.heapify(heap)
        bound: dict[int, str] = {}

        async def prorl_heap(i: int, body: dict[str, Any]) -> None:
            if i not in bound:
                count, k, url = heapq.heappop(heap)
                heapq.heappush(heap, (count + 1, k, url))
                bound[i] = url
            _checked(await client.post(bound[i] + "/v1/completions", json=body), body["max_tokens"])

        out["prorl_heap"] = await replay(turns, concurrency, prorl_heap, model)
    return out
