# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""What a trainer process is asked to do, and how it reports back.

`prorl train` (the project's venv) writes a job as JSON and runs `python -m
nemo_gym_prorl.integrations.trl.sft JOB.json` or `... .grpo JOB.json` with the model venv's
interpreter. The trainer prints one `EVENT_PREFIX {json}` line per event (a step, a publish, the
end) on stdout, which the orchestrator reads as its progress; everything else on stdout and
stderr is the trainer's own log. Both sides import these models, so they use nothing newer
than Python 3.11 and nothing outside pydantic.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

EVENT_PREFIX = "PRORL_EVENT "

# The loss types TRL 1.16's GRPOTrainer implements (`GRPOConfig.loss_type`).
LossType = Literal["grpo", "dr_grpo", "dapo", "bnpo", "cispo", "sapo", "luspo", "vespo"]


class LoraSettings(BaseModel):
    """The adapter every phase trains (PEFT `LoraConfig`); its rank must fit the server's
    `--max-lora-rank`."""

    model_config = ConfigDict(extra="forbid")

    r: int = Field(16, ge=1, le=512)
    alpha: int = Field(32, ge=1)
    dropout: float = Field(0.0, ge=0.0, lt=1.0)
    target_modules: str = "all-linear"

    def peft_config(self) -> Any:
        """PEFT's `LoraConfig` for these settings (imported here: PEFT is in the model venv only)."""
        from peft import LoraConfig

        return LoraConfig(
            r=self.r,
            lora_alpha=self.alpha,
            lora_dropout=self.dropout,
            target_modules=self.target_modules,
            task_type="CAUSAL_LM",
        )


class OptimizerSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    learning_rate: float = Field(gt=0.0)
    batch_size: int = Field(4, ge=1, description="sequences per forward/backward pass")
    gradient_accumulation_steps: int = Field(1, ge=1)
    weight_decay: float = Field(0.0, ge=0.0)
    max_grad_norm: float = Field(1.0, gt=0.0)
    seed: int = 0


class SftJob(BaseModel):
    """Supervised fine-tuning of a LoRA on demonstrations' token ids (loss on model tokens)."""

    model_config = ConfigDict(extra="forbid")

    model_dir: str
    demonstrations: str = Field(
        description="JSONL of `Demonstration`s (prompt_ids, completion_ids, env_mask)"
    )
    output_dir: str = Field(description="the policies' directory: the adapter goes to policy-v<version>")
    version: int = Field(1, ge=1, description="the policy version the adapter will be published as")
    lora: LoraSettings = Field(default_factory=LoraSettings)
    optimizer: OptimizerSettings
    epochs: float = Field(2.0, gt=0.0)
    threads: int | None = Field(None, ge=1, description="torch CPU threads (None: torch's default)")


class GrpoJob(BaseModel):
    """GRPO through the rollout service, publishing the adapter as a policy after every step."""

    model_config = ConfigDict(extra="forbid")

    model_dir: str
    init_adapter: str | None = Field(
        None, description="start from this adapter (the SFT's); None: a new LoRA"
    )
    service_url: str
    token: str | None = None
    prompts: str = Field(description="JSONL of task instances (the service's rows), in training order")
    output_dir: str
    task: str | None = Field(None, description="the service's task handler (None: the rows' data_source)")
    lora: LoraSettings = Field(default_factory=LoraSettings)
    optimizer: OptimizerSettings
    steps: int = Field(ge=1)
    prompts_per_step: int = Field(4, ge=1)
    num_generations: int = Field(4, ge=2)
    loss_type: LossType = "dapo"
    beta: float = Field(0.0, ge=0.0, description="KL coefficient (0: no reference model, as DAPO)")
    epsilon: float = Field(0.2, gt=0.0)
    epsilon_high: float | None = Field(0.28, gt=0.0, description="DAPO's clip-higher")
    sampling_params: dict[str, Any] = Field(default_factory=dict)
    version_offset: int = Field(0, ge=0, description="published version = offset + trainer step")
    collect_ahead: bool = Field(
        False,
        description="submit the next step's rollouts before this step trains (bounded by max_staleness)",
    )
    rollout_timeout_s: float = Field(1800.0, gt=0.0)
    journal: str | None = Field(
        None,
        description="the submitted, not yet trained-on jobs (a restarted trainer takes them up: nothing is lost)",
    )
    samples_path: str | None = Field(
        None, description="append every step's TRL samples (ids, log-probs, env_mask, versions) here as JSONL"
    )
    threads: int | None = Field(None, ge=1)
    simulated_step_s: float | None = Field(
        None,
        gt=0.0,
        description="SIMULATED: replace each optimizer step by a sleep this long (a GPU step's stand-in "
        "for the overlap benchmark); the policy is then never updated",
    )


class Event(BaseModel):
    """One line of a trainer's progress."""

    model_config = ConfigDict(extra="allow")

    event: str


def emit(event: str, **fields: Any) -> None:
    """Print one event line for the orchestrator (flushed: it reads as the trainer runs)."""
    print(EVENT_PREFIX + json.dumps({"event": event, **fields}, default=str), flush=True)


def parse_event(line: str) -> Event | None:
    """The event a trainer's stdout line carries, or None for an ordinary log line."""
    if not line.startswith(EVENT_PREFIX):
        return None
    return Event.model_validate_json(line[len(EVENT_PREFIX) :])


def exit_with_parent(interval_s: float = 2.0) -> None:
    """End this trainer if the process that started it dies (killed, say, before it could stop
    its trainer): the trainer runs in its own session, so no signal would reach it otherwise."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(interval_s)
        os._exit(1)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def load_job(model: type, argv: list[str] | None = None) -> Any:
    """The job a trainer program was started with (`python -m ... JOB.json`); from then on the
    trainer ends with its parent."""
    exit_with_parent()
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        raise SystemExit(f"usage: python -m {model.__module__} JOB.json")
    with open(args[0], encoding="utf-8") as handle:
        return model.model_validate_json(handle.read())
