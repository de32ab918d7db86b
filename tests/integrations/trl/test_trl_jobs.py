# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""A trainer's job says what it computes with. A GRPO job's rollouts are sampled at the
temperature the trainer computes its log-probs at, sent explicitly so the service's defaults never
decide it; sampling that reshapes the distribution in a way the trainer's log-probs cannot
reproduce (top-p, top-k, min-p, penalties, guided decoding) is refused when the job is built,
before any rollout runs. Both trainers train where TRL and accelerate put them unless told `cpu`,
and so do the jobs `prorl train` builds. (The jobs are pydantic only: this runs in the project
venv.)"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from pydantic import ValidationError
from trl_venv import run_in_model_venv

from nemo_gym_prorl.integrations.trl.jobs import GrpoJob, OptimizerSettings, SftJob
from nemo_gym_prorl.llm.embedded import EmbeddedLayout
from nemo_gym_prorl.training.config import TrainConfig
from nemo_gym_prorl.training.trainer_jobs import grpo_job, sft_job


def grpo(**fields: Any) -> GrpoJob:
    return GrpoJob(
        model_dir="/model",
        service_url="http://127.0.0.1:1",
        prompts="/prompts.jsonl",
        output_dir="/policies",
        optimizer=OptimizerSettings(learning_rate=1e-5),
        steps=1,
        **fields,
    )


def test_rollouts_are_sent_the_temperature_and_top_p_the_trainer_computes_with() -> None:
    # TRL's own defaults (1.0) when the job gives none, so the service's defaults never decide them.
    assert grpo().sampling_params == {"temperature": 1.0, "top_p": 1.0}
    given = grpo(sampling_params={"temperature": 0.7, "max_tokens": 96, "seed": 3})
    assert given.sampling_params == {"temperature": 0.7, "top_p": 1.0, "max_tokens": 96, "seed": 3}
    # What the job file says is what the trainer program reads back.
    assert GrpoJob.model_validate_json(given.model_dump_json()).sampling_params == given.sampling_params


@pytest.mark.parametrize(
    ("sampling", "named"),
    [
        ({"top_p": 0.9}, "top_p=0.9"),
        ({"top_k": 20}, "top_k=20"),
        ({"min_p": 0.05}, "min_p=0.05"),
        ({"repetition_penalty": 1.1}, "repetition_penalty=1.1"),
        ({"presence_penalty": 0.5}, "presence_penalty=0.5"),
        ({"guided_regex": r"\d+"}, "guided_regex="),
        ({"structured_outputs": {"regex": r"\d+"}}, "structured_outputs="),
    ],
)
def test_sampling_the_trainers_log_probs_cannot_reproduce_is_refused_when_the_job_is_built(
    sampling: dict[str, Any], named: str
) -> None:
    with pytest.raises(ValidationError, match="softmax\\(logits / temperature\\)") as refused:
        grpo(sampling_params={"temperature": 1.0, **sampling})
    assert named in str(refused.value)


@pytest.mark.parametrize("temperature", [0, 0.0, -1.0, "hot", None])
def test_a_temperature_that_is_not_a_sample_of_the_policy_is_refused(temperature: Any) -> None:
    with pytest.raises(ValidationError, match="must be a number above 0"):
        grpo(sampling_params={"temperature": temperature})


def test_settings_that_leave_the_distribution_as_it_is_are_accepted() -> None:
    neutral = {"top_p": 1, "top_k": -1, "min_p": 0.0, "repetition_penalty": 1.0, "presence_penalty": 0}
    assert grpo(sampling_params=neutral).sampling_params == {"temperature": 1.0, **neutral}


def test_trainers_train_where_trl_puts_them_unless_told_cpu() -> None:
    sft = SftJob(
        model_dir="/m",
        demonstrations="/d.jsonl",
        output_dir="/p",
        optimizer=OptimizerSettings(learning_rate=1),
    )
    assert sft.device == "auto" and grpo().device == "auto"
    assert grpo(device="cpu").device == "cpu"
    with pytest.raises(ValidationError):
        grpo(device="cuda:3")  # not a choice the job makes: accelerate places the model


def test_the_jobs_prorl_train_builds_take_the_default_device_and_the_configs_sampling(tmp_path: Path) -> None:
    config = TrainConfig()
    layout = EmbeddedLayout(tmp_path)
    sft = sft_job(config, layout, demonstrations=tmp_path / "d.jsonl", output_dir=tmp_path / "p")
    service: Any = SimpleNamespace(url="http://127.0.0.1:1", token="t")
    job = grpo_job(config, layout, service, prompts=tmp_path / "g.jsonl", output_dir=tmp_path / "p")
    assert sft.device == job.device == "auto"
    assert job.sampling_params == {**config.sampling, "temperature": 1.0, "top_p": 1.0}


def test_a_cuda_trainer_without_a_gpu_is_refused_before_training() -> None:
    # In the model venv, where the trainers run: this machine has no CUDA GPU.
    out = run_in_model_venv(
        "import json\n"
        "from nemo_gym_prorl.integrations.trl.jobs import use_cpu\n"
        "try:\n    use_cpu('cuda')\n    print(json.dumps('accepted'))\n"
        "except RuntimeError as exc:\n    print(json.dumps(str(exc)))\n"
    )
    assert out.startswith("device=cuda, but torch sees no CUDA GPU")
