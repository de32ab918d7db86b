# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The trainer programs' jobs, built from a training config: one builder per trainer, used by
`prorl train` and by the benchmarks that run the same trainers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nemo_gym_prorl.integrations.trl.jobs import GrpoJob, SftJob
from nemo_gym_prorl.llm.embedded import EmbeddedLayout
from nemo_gym_prorl.training.config import TrainConfig
from nemo_gym_prorl.training.session import TrainingService


def sft_job(config: TrainConfig, layout: EmbeddedLayout, *, demonstrations: Path, output_dir: Path) -> SftJob:
    """SFT of a new LoRA on the demonstrations, saved as policy v1."""
    return SftJob(
        model_dir=str(layout.model_dir),
        demonstrations=str(demonstrations),
        output_dir=str(output_dir),
        version=1,
        lora=config.lora,
        optimizer=config.sft.optimizer,
        epochs=config.sft.epochs,
        threads=config.trainer_threads,
    )


def grpo_job(
    config: TrainConfig,
    layout: EmbeddedLayout,
    service: TrainingService,
    *,
    prompts: Path,
    output_dir: Path,
    **overrides: Any,
) -> GrpoJob:
    """GRPO through the service with the config's settings; `overrides`: GrpoJob fields that a
    caller sets itself (the adapter to start from, the version offset, a journal, ...)."""
    grpo = config.grpo
    settings: dict[str, Any] = {
        "model_dir": str(layout.model_dir),
        "service_url": service.url,
        "token": service.token,
        "prompts": str(prompts),
        "output_dir": str(output_dir),
        "lora": config.lora,
        "optimizer": grpo.optimizer,
        "steps": grpo.steps,
        "prompts_per_step": grpo.prompts_per_step,
        "num_generations": grpo.num_generations,
        "loss_type": grpo.loss_type,
        "beta": grpo.beta,
        "epsilon": grpo.epsilon,
        "epsilon_high": grpo.epsilon_high,
        "sampling_params": config.sampling,
        "collect_ahead": grpo.collect_ahead,
        "rollout_timeout_s": grpo.rollout_timeout_s,
        "threads": config.trainer_threads,
    }
    return GrpoJob.model_validate({**settings, **overrides})
