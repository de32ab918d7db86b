# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""A trainer talking to the service the way ProRL Agent's trainer does: register its vLLM servers
(`/add_llm_server`), `/start`, then concurrent blocking `/process` calls, one per sample, each
answering with the trajectory's token ids, log-probs and reward. Plain HTTP: no import of this
project, as a trainer in another codebase would do it.

    python examples/prorl_process_client.py --url http://127.0.0.1:8000 --llm 127.0.0.1:8001
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

import httpx

ROWS = Path(__file__).resolve().parents[1] / "resources_servers" / "prorl_math" / "data" / "example.jsonl"


async def main(url: str, llm_servers: list[str], samples: int, max_tokens: int) -> int:
    instance = json.loads(ROWS.read_text().splitlines()[0])
    sampling = {"temperature": 1.0, "top_p": 1.0, "max_tokens": max_tokens}
    async with httpx.AsyncClient(base_url=url, timeout=900) as http:
        for address in llm_servers:
            (await http.post("/add_llm_server", json={"address": address})).raise_for_status()
        (await http.post("/start")).raise_for_status()
        print("status:", (await http.get("/status")).json())

        replies = await asyncio.gather(
            *(
                http.post("/process", json={"instance": instance, "sampling_params": sampling})
                for _ in range(samples)
            )
        )
    for reply in replies:
        reply.raise_for_status()
        body = reply.json()
        turns = [m for m in body["messages"] if m.get("role") == "assistant"]
        tokens = sum(len(m.get("token_ids") or []) for m in turns)
        print(
            f"sample: reward={body['reward']} finish={body['finish']} end_properly={body['end_properly']} "
            f"turns={len(turns)} generated_tokens={tokens} timing={ {k: round(v, 2) for k, v in body['timing'].items() if isinstance(v, float)} }"
        )
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000", help="the rollout service")
    parser.add_argument("--llm", action="append", default=[], help="host:port of a vLLM server (repeatable)")
    parser.add_argument("--samples", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=128)
    args = parser.parse_args()
    raise SystemExit(asyncio.run(main(args.url, args.llm, args.samples, args.max_tokens)))
