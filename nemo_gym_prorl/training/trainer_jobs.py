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
        device=config.device,
        publish_as="weights",  # every policy is served as full weights
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
    settings: dict[str, Any] = {
        **config.grpo.algorithm(),
        "model_dir": str(layout.model_dir),
        "service_url": service.url,
        "token": service.token,
        "prompts": str(prompts),
        "output_dir": str(output_dir),
        "lora": config.lora,
        "sampling_params": config.sampling,
        "threads": config.trainer_threads,
        "device": config.device,
        "task": config.task,
    }
    return GrpoJob.model_validate({**settings, **overrides})
