# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The native rollout API from Python: one rollout streamed back as it finishes, then a DAPO batch
(groups of G samples per prompt, uniform-reward groups dropped, prompts replenished).

Start a service and a model first, for example:
    prorl model serve --port 8001 --key-file model.key & # the embedded vLLM-CPU model and its key
    prorl serve server.port=8000 llm.api_key_file=model.key &   # the service holds the key
    python examples/native_client.py --url http://127.0.0.1:8000 --backend http://127.0.0.1:8001
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

from nemo_gym_prorl.service.client import AsyncRolloutClient

ROWS = Path(__file__).resolve().parents[1] / "resources_servers" / "prorl_math" / "data" / "example.jsonl"


async def main(url: str, backend: str | None, prompts: int, group_size: int, max_tokens: int) -> int:
    rows = [json.loads(line) for line in ROWS.read_text().splitlines()[:prompts]]
    sampling = {"temperature": 1.0, "top_p": 1.0, "max_tokens": max_tokens}
    async with AsyncRolloutClient(url, timeout=600) as client:
        if backend:
            await client.add_backend(backend)  # the service balances over every backend it knows

        # 1. submit without blocking, stream results back as each finishes
        ids = await client.submit([{"instance": rows[0], "sampling_params": sampling}])
        async for result in client.stream(ids, timeout_s=600):
            turns = (
                [m for m in result.trajectory.messages if m["role"] == "assistant"]
                if result.trajectory
                else []
            )
            print(
                f"rollout {result.id}: state={result.state} reward={result.reward} turns={len(turns)} "
                f"stop={result.trajectory.stop_reason if result.trajectory else None} "
                f"init/run/eval s={result.timing.init_time:.1f}/{result.timing.run_time:.1f}/{result.timing.eval_time:.1f}"
            )

        # 2. a DAPO batch: informative groups stream back as they complete
        config = {"group_size": group_size, "sampling_params": sampling, "dropped_with_samples": True}
        batch = await client.start_batch(groups=len(rows), source={"rows": rows}, config=config)
        async for event in client.stream_batch(batch.batch_id):
            if event.type == "end":
                stats = event.stats
                print(
                    f"batch {batch.batch_id}: {stats.informative_groups} informative, "
                    f"{stats.uniform_groups} uniform, {stats.failed_groups} failed groups; "
                    f"{stats.rollouts_spent} rollouts spent"
                )
                break
            group = event.group
            assert group is not None
            print(f"group {event.type}: rewards={group.rewards} ({group.status})")
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000", help="the rollout service")
    parser.add_argument("--backend", default=None, help="an OpenAI-compatible vLLM server to register")
    parser.add_argument("--prompts", type=int, default=2)
    parser.add_argument("--group-size", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=128)
    args = parser.parse_args()
    raise SystemExit(
        asyncio.run(main(args.url, args.backend, args.prompts, args.group_size, args.max_tokens))
    )
