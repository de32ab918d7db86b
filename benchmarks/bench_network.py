# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""`prorl bench network`: the trainer and the rollout service on two sides of a slow link.

The service is `prorl serve` in its own process; the trainer's side is the Python client
(`AsyncRolloutClient`) reaching it through a delaying TCP proxy (`delay_proxy.py`) that adds 0,
50 or 200 ms of round trip to every byte (this kernel has no netem qdisc; a proxy needs no
privileges). The same batch of rollouts goes through three APIs:

- streaming: one submit of every job, then results as they finish on one NDJSON stream;
- long poll: one submit, then `POST /v1/rollouts/wait` until nothing is pending;
- `/process` (ProRL's blocking call): one request per rollout, as many in flight as the
  service has workers.

rollouts/s at each round trip over the same API at 0 ms (goal for streaming and long poll: at
least 0.95 at 200 ms). Then a link that resets every third answer (a stream after its first results): the client
sends again what cannot act twice and resumes cut streams by job id, and the service counts
each job once; the run reports jobs submitted, results delivered and duplicates.

SIMULATED: the rollouts' stage times (scripted handlers sleep INIT 0.2 s, RUN 2 s, EVAL 0.2 s);
the HTTP, the service, the pipeline and the link's delays are real.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

from delay_proxy import DelayProxy

import provenance  # first: it notes the load average the run starts under
from nemo_gym_prorl.service import AsyncRolloutClient
from scripted_handlers import start_scripted_service

SIMULATED = ["rollout stage times (scripted handlers: INIT 0.2 s, RUN 2 s, EVAL 0.2 s)"]
ROLLOUTS = 64
WORKERS = 16
RTTS_MS = (0, 50, 200)
SCRIPT = {"init_s": 0.2, "run_s": 2.0, "eval_s": 0.2}
CUT_EVERY = 3  # the third answer of a run is its stream or its first long poll


def jobs() -> list[dict[str, Any]]:
    return [{"task": "scripted", "instance": {"script": SCRIPT}} for _ in range(ROLLOUTS)]


async def streaming(client: AsyncRolloutClient) -> list[str]:
    ids = await client.submit(jobs())
    return [r.id async for r in client.stream(ids, timeout_s=600)]


async def long_poll(client: AsyncRolloutClient) -> list[str]:
    pending = await client.submit(jobs())
    done: list[str] = []
    while pending:
        answer = await client.wait(pending, timeout_s=30, mode="any")
        done += [r.id for r in answer.results]
        pending = list(answer.pending)
    return done


async def process(client: AsyncRolloutClient) -> list[str]:
    gate = asyncio.Semaphore(WORKERS)

    async def one(index: int) -> str:
        async with gate:
            job_id = f"process-{time.monotonic_ns()}-{index}"
            await client.process({"data_source": "scripted", "script": SCRIPT}, job_id=job_id, timeout=600)
            return job_id

    return list(await asyncio.gather(*(one(i) for i in range(ROLLOUTS))))


APIS: dict[str, Callable[[AsyncRolloutClient], Awaitable[list[str]]]] = {
    "streaming": streaming,
    "long_poll": long_poll,
    "process": process,
}


async def through(url: str, rtt_ms: float, api: str, cut_every: int = 0) -> dict[str, Any]:
    target_host, target_port = url.removeprefix("http://").rsplit(":", 1)
    proxy = DelayProxy(target_host, int(target_port), rtt_s=rtt_ms / 1000, cut_every=cut_every)
    async with proxy.running(), AsyncRolloutClient(proxy.url, timeout=120) as client:
        before = (await client.status()).pipeline.submitted_total
        started = time.monotonic()
        delivered = await APIS[api](client)
        seconds = time.monotonic() - started
        submitted = (await client.status()).pipeline.submitted_total - before
    return {
        "rtt_ms": rtt_ms,
        "api": api,
        "seconds": round(seconds, 3),
        "rollouts_per_s": round(len(set(delivered)) / seconds, 3),
        "delivered": len(delivered),
        "delivered_ids": delivered,
        "duplicates": len(delivered) - len(set(delivered)),
        "submitted": submitted,
        "connections": proxy.connections,
        "answers": proxy.answers,
        "answers_cut": proxy.cut,
    }


async def measure(url: str) -> dict[str, Any]:
    await through(url, 0, "streaming")  # warm: connections, code paths
    runs = [await through(url, rtt, api) for api in APIS for rtt in RTTS_MS]
    base = {r["api"]: r["rollouts_per_s"] for r in runs if r["rtt_ms"] == 0}
    for r in runs:
        r["vs_0_ms"] = round(r["rollouts_per_s"] / base[r["api"]], 3)
    cut = [await through(url, 50, api, cut_every=CUT_EVERY) for api in ("streaming", "long_poll")]
    return {"rollouts": ROLLOUTS, "workers": WORKERS, "script": SCRIPT, "runs": runs, "cut_links": cut}


def summary(result: dict[str, Any]) -> str:
    parts = [
        f"{r['api']} at {r['rtt_ms']:g} ms: {r['rollouts_per_s']:.2f} rollouts/s ({r['vs_0_ms']:.2f} of 0 ms)"
        for r in result["runs"]
        if r["rtt_ms"] != 0
    ]
    cuts = [
        f"{c['api']} with {c['answers_cut']} of {c['answers']} answers cut: {c['delivered']} "
        f"delivered of {c['submitted']} submitted, {c['duplicates']} twice"
        for c in result["cut_links"]
    ]
    return "; ".join(parts + cuts)


def broken_promises(result: dict[str, Any]) -> list[str]:
    """What a cut link must not do: lose a rollout, deliver one twice, run one twice; and a cut
    run that cut nothing proves nothing."""
    broken = []
    for c in result["cut_links"]:
        if not c["answers_cut"]:
            broken.append(f"{c['api']}: no answer was cut")
        if len(set(c["delivered_ids"])) != ROLLOUTS or c["duplicates"] or c["submitted"] != ROLLOUTS:
            broken.append(
                f"{c['api']}: {c['delivered']} delivered ({c['duplicates']} twice), {c['submitted']} submitted "
                f"for {ROLLOUTS} rollouts"
            )
    return broken


def main(as_json: bool = False) -> int:
    proc, url = start_scripted_service(WORKERS)
    try:
        result = asyncio.run(measure(url))
    finally:
        proc.terminate()
        proc.wait(30)
    broken = broken_promises(result)
    for run in [*result["runs"], *result["cut_links"]]:
        del run["delivered_ids"]
    provenance.record(
        "network",
        result,
        simulated=SIMULATED,
        ours="the Python client through a delaying TCP proxy (+50 / +200 ms round trip; every 3rd answer "
        "reset mid-answer for the cut runs) to `prorl serve` in its own process: streaming, long poll, /process",
        against="the same client, service and rollouts with no delay (0 ms)",
        measured=summary(result),
    )
    print(json.dumps(result) if as_json else summary(result))
    for line in broken:
        print(f"FAILED {line}", file=sys.stderr)
    return 1 if broken else 0
