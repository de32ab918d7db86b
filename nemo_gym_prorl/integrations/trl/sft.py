# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The cold-start phase of `prorl train`, as a program in the model venv:

    python -m nemo_gym_prorl.integrations.trl.sft JOB.json      (an `SftJob`)

TRL's `SFTTrainer` trains a LoRA on the demonstrations' own token ids: `input_ids` is the prompt
ids followed by the completion ids, exactly as the backend tokenized and templated them, and
`assistant_masks` is 0 on the prompt and on the tools' and template's tokens, 1 on the tokens the
assistant wrote (the demonstration's `env_mask`), so the loss is on model tokens only and nothing
is re-tokenized. The adapter is saved as `policy-v<version>` for the orchestrator to publish,
and with `publish_as: weights` also merged into the model as `weights-v<version>` (the model is
in memory already; a merge program would load torch and the model again). Prints a `step` event
per logged optimizer step and a `done` event with the adapter's path (and the weights').
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

from nemo_gym_prorl.integrations.trl.jobs import SftJob, emit, load_job, use_cpu, weights_dir
from nemo_gym_prorl.integrations.trl.no_vllm import hide_vllm


def sequences(path: str) -> dict[str, list[list[int]]]:
    """The demonstrations as `input_ids` and `assistant_masks` columns."""
    ids: list[list[int]] = []
    masks: list[list[int]] = []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            if not line.strip():
                continue
            demo = json.loads(line)
            prompt, completion, env_mask = demo["prompt_ids"], demo["completion_ids"], demo["env_mask"]
            if len(completion) != len(env_mask) or not any(env_mask):
                raise ValueError(f"{path}: a demonstration's env_mask does not cover its model tokens")
            ids.append([*prompt, *completion])
            masks.append([0] * len(prompt) + list(env_mask))
    if not ids:
        raise ValueError(f"{path} holds no demonstration")
    return {"input_ids": ids, "assistant_masks": masks}


def sft_config(job: SftJob) -> Any:
    """TRL's `SFTConfig` for the job (its device: where TRL and accelerate put it, unless `cpu`)."""
    from trl import SFTConfig

    return SFTConfig(
        output_dir=job.output_dir,
        num_train_epochs=job.epochs,
        per_device_train_batch_size=job.optimizer.batch_size,
        gradient_accumulation_steps=job.optimizer.gradient_accumulation_steps,
        learning_rate=job.optimizer.learning_rate,
        weight_decay=job.optimizer.weight_decay,
        max_grad_norm=job.optimizer.max_grad_norm,
        lr_scheduler_type="constant",
        max_length=None,  # never cut a demonstration: its ids are the data
        packing=False,
        gradient_checkpointing=False,  # TRL turns it on by default; a 135M model fits without it
        bf16=False,
        use_cpu=use_cpu(job.device),
        report_to="none",
        save_strategy="no",
        logging_steps=1,
        seed=job.optimizer.seed,
        disable_tqdm=True,
    )


def main() -> None:
    hide_vllm()  # before TRL is imported: SFT generates nothing
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import SFTTrainer

    from nemo_gym_prorl.integrations.trl.callback import save_adapter
    from nemo_gym_prorl.integrations.trl.merge import write_merged

    job: SftJob = load_job(SftJob)
    if job.threads:
        torch.set_num_threads(job.threads)
    torch.manual_seed(job.optimizer.seed)
    columns = sequences(job.demonstrations)
    tokens = sum(len(seq) for seq in columns["input_ids"])
    model_tokens = sum(sum(mask) for mask in columns["assistant_masks"])
    tokenizer = AutoTokenizer.from_pretrained(job.model_dir)
    model = AutoModelForCausalLM.from_pretrained(job.model_dir, dtype=torch.float32)
    args = sft_config(job)
    steps_per_epoch = math.ceil(
        len(columns["input_ids"]) / (job.optimizer.batch_size * job.optimizer.gradient_accumulation_steps)
    )
    started = time.monotonic()

    class StepEvents(TrainerCallback):
        def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kwargs: Any) -> None:
            if logs and "loss" in logs:
                emit(
                    "step",
                    step=int(state.global_step),
                    of=math.ceil(steps_per_epoch * job.epochs),
                    epoch=round(float(state.epoch or 0.0), 3),
                    loss=round(float(logs["loss"]), 4),
                    seconds=round(time.monotonic() - started, 1),
                )

    trainer = SFTTrainer(
        model=model,
        args=args,
        train_dataset=Dataset.from_dict(columns),
        processing_class=tokenizer,
        peft_config=job.lora.peft_config(),
        callbacks=[StepEvents()],
    )
    trainer.train()
    seconds = time.monotonic() - started
    path = save_adapter(trainer.model, Path(job.output_dir), job.version)
    weights = None
    if job.publish_as == "weights":
        out = weights_dir(Path(job.output_dir), job.version).resolve()
        weights = str(write_merged(trainer.model, Path(job.model_dir), out))
    emit(
        "done",
        adapter_path=str(path),
        weights_path=weights,
        version=job.version,
        demonstrations=len(columns["input_ids"]),
        tokens=tokens,
        model_tokens=model_tokens,
        epochs=job.epochs,
        seconds=round(seconds, 2),
        tokens_per_s=round(tokens * job.epochs / max(seconds, 1e-9), 1),
    )


if __name__ == "__main__":
    main()
