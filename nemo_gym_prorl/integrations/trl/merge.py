# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""A LoRA adapter merged into the model it was trained on, as a program in the model venv:

    python -m nemo_gym_prorl.integrations.trl.merge JOB.json      (a `MergeJob`)

PEFT's `merge_and_unload` folds each adapted layer's `scale * B @ A` into its weight, in fp32,
and the result is saved as a full checkpoint beside the base model's tokenizer and chat template.
Served as full weights (the pool reloads them in place), the policy generates what the adapter
generates (the same greedy texts, log-probs within ~3e-5 measured on SmolLM2-135M) at the base
model's speed, which on vLLM-CPU is 3-6x the speed of the same policy as a runtime LoRA. Prints a
`done` event with the checkpoint's path and the seconds it took.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from nemo_gym_prorl.integrations.trl.jobs import MergeJob, emit, load_job

# What `save_pretrained` writes itself; everything else of the base (tokenizer, chat template)
# is copied, so the checkpoint also serves as a model on its own.
_WRITTEN = {"config.json", "generation_config.json"}


def merge(job: MergeJob) -> Path:
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    out = Path(job.output_dir)
    model = AutoModelForCausalLM.from_pretrained(job.model_dir, dtype=torch.float32)
    merged = PeftModel.from_pretrained(model, job.adapter).merge_and_unload()
    partial = out.with_name(out.name + ".partial")  # never a half-written checkpoint under `out`
    shutil.rmtree(partial, ignore_errors=True)
    merged.save_pretrained(partial, safe_serialization=True)
    for source in Path(job.model_dir).iterdir():
        if (
            source.is_file()
            and source.name not in _WRITTEN
            and not source.name.startswith(".")
            and (source.suffix not in (".safetensors", ".bin") and not source.name.endswith(".index.json"))
        ):
            shutil.copy2(source, partial / source.name)
    shutil.rmtree(out, ignore_errors=True)
    partial.rename(out)
    return out


def main() -> None:
    job: MergeJob = load_job(MergeJob)
    started = time.monotonic()
    path = merge(job)
    emit("done", weights_path=str(path), seconds=round(time.monotonic() - started, 1))


if __name__ == "__main__":
    main()
