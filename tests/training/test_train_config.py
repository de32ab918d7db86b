# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""`prorl train`'s configuration: the shipped files validate, overrides apply, and a mistake is
a clear error naming the key."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from nemo_gym_prorl.datasets.environments import environment as dataset_environment
from nemo_gym_prorl.integrations.trl.jobs import GrpoAlgorithm, GrpoJob
from nemo_gym_prorl.llm.embedded import EmbeddedLayout
from nemo_gym_prorl.service.config import load_config
from nemo_gym_prorl.training.config import GrpoSettings, TrainConfigError, load_train_config
from nemo_gym_prorl.training.trainer_jobs import grpo_job, sft_job


@pytest.mark.parametrize("name", ["default", "smoke", "harness_math", "harness_swe"])
def test_every_shipped_training_config_validates(name: str) -> None:
    config = load_train_config(name)
    assert config.lora.r <= config.backend.lora.max_lora_rank
    assert config.split.heldout_size >= 64


def test_the_default_trains_unconstrained_through_the_math_service_and_evaluates_all_three_policies() -> None:
    config = load_train_config()
    assert config.service_overrides[0] == "tasks=math"
    assert not any("constrained" in o for o in config.service_overrides)
    assert config.evaluation.phases == ["base", "sft", "grpo"]
    assert config.grpo.loss_type == "dapo" and config.sampling["temperature"] == 1.0


def test_dotted_overrides_apply_and_are_validated() -> None:
    config = load_train_config("default", ["grpo.steps=2", "sampling.max_tokens=64", "grpo.loss_type=grpo"])
    assert config.grpo.steps == 2 and config.sampling["max_tokens"] == 64 and config.grpo.loss_type == "grpo"


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        (["grpo.steps=0"], "grpo.steps"),
        (["grpo.loss_type=ppo"], "grpo.loss_type"),
        (["lora.r=32"], "max_lora_rank"),
        (["not_a_key=1"], "not_a_key"),
        (["split.heldout_size=10"], "split.heldout_size"),
        (["split.rl_families=[gcd]"], "split.rl_families"),
        (["sampling.top_p=0.9"], "top_p=0.9"),  # the trainer's log-probs could not reproduce it
        (["sampling.temperature=0"], "temperature"),
    ],
)
def test_a_bad_setting_is_an_error_naming_it(overrides: list[str], named: str) -> None:
    with pytest.raises(TrainConfigError, match=named):
        load_train_config("default", overrides)


def test_each_grpo_setting_is_declared_once_and_a_configs_grpo_section_reaches_the_job_unchanged(
    tmp_path: Path,
) -> None:
    # The config's section and the trainer's job inherit the algorithm's settings; neither
    # declares one again, and the config adds only what the orchestrator does itself.
    algorithm = set(GrpoAlgorithm.model_fields)
    for model in (GrpoSettings, GrpoJob):
        assert issubclass(model, GrpoAlgorithm)
        assert not algorithm & set(vars(model).get("__annotations__", {}))
    assert set(GrpoSettings.model_fields) - algorithm == {"restarts", "rehearsal", "guide_rehearsal"}

    config = load_train_config("default", ["grpo.epsilon=0.1", "grpo.rollout_timeout_s=60", "grpo.beta=0.1"])
    service: Any = SimpleNamespace(url="http://127.0.0.1:1", token=None)
    job = grpo_job(
        config, EmbeddedLayout(tmp_path), service, prompts=tmp_path / "g.jsonl", output_dir=tmp_path
    )
    assert job.algorithm() == config.grpo.algorithm()
    # ... and so does the job file the trainer program reads.
    assert GrpoJob.model_validate_json(job.model_dump_json()).algorithm() == config.grpo.algorithm()


def test_an_unknown_config_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(TrainConfigError, match="no training configuration"):
        load_train_config(str(tmp_path / "missing.yaml"))


def test_an_environment_gives_grpo_prompts_and_heldout_tasks_from_its_prepared_rows(tmp_path: Path) -> None:
    from nemo_gym_prorl.datasets.rows import write_jsonl
    from nemo_gym_prorl.training.environment_split import EnvironmentRowsMissing, EnvironmentSplit

    config = load_train_config("default", ["environment=gsm8k"])
    assert isinstance(config.task_rows(), EnvironmentSplit)
    split = EnvironmentSplit(environment="gsm8k", data_dir=tmp_path)
    with pytest.raises(EnvironmentRowsMissing, match="prorl data prepare --environment gsm8k"):
        split.heldout_rows()
    write_jsonl(tmp_path / "gsm8k" / "train.jsonl", [{"task_id": f"t{i}"} for i in range(10)])
    write_jsonl(tmp_path / "gsm8k" / "validation.jsonl", [{"task_id": f"v{i}"} for i in range(70)])
    assert [r["task_id"] for r in split.train_rows(3, start=2)] == ["t2", "t3", "t4"]
    assert len(split.heldout_rows()) == 64
    with pytest.raises(ValueError, match="10 training rows; 12 are needed"):
        split.train_rows(4, start=8)


def test_an_unknown_environment_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(TrainConfigError, match="unknown dataset environment 'nope'"):
        load_train_config("default", ["environment=nope"])


def test_a_non_math_environment_is_served_beside_the_math_of_the_demonstrations() -> None:
    math = load_train_config("default", ["environment=gsm8k"]).service_overrides
    assert math[0] == "tasks=math"
    for name, domain in (("mmlu_pro", "stem"), ("humaneval", "code"), ("swe_gym", "swe")):
        served = load_train_config("default", [f"environment={name}"]).service_overrides
        # every domain; the other overrides kept; the environment's task as bounded as math's
        assert served == ["tasks=default", *math[1:], f"+tasks.{domain}.options.agent.max_time_s=300"]


@pytest.mark.parametrize("name", ["default", "smoke"])
@pytest.mark.parametrize("environment", [None, "gsm8k", "mmlu_pro", "humaneval", "swe_gym"])
def test_every_rollout_a_run_serves_is_bounded_in_time(name: str, environment: str | None) -> None:
    """Each task a run's rollouts go to (math for the demonstrations and the split, the
    environment's own) stops its agent loop within 5 minutes and is ended by the pipeline within
    20, whatever it waits on: no rollout holds a GRPO step for longer."""
    config = load_train_config(name, [f"environment={environment}"] if environment else [])
    served = load_config([*config.service_overrides, "llm.backends=[http://127.0.0.1:1/v1]"])
    domains = {"math"} | ({dataset_environment(environment).domain} if environment else set())
    for domain in domains:
        assert served.tasks[domain].options["agent"]["max_time_s"] <= 300, domain
    assert served.pipeline.active_time_s is not None and served.pipeline.active_time_s <= 1200


def test_rehearsal_must_leave_room_for_the_rl_families_in_every_step() -> None:
    with pytest.raises(TrainConfigError, match=r"rehearsal \(6\) must be below grpo.prompts_per_step \(6\)"):
        load_train_config("default", ["grpo.rehearsal=6"])


def test_a_harness_run_serves_the_math_domain_through_the_harness_and_names_its_task_in_every_job() -> None:
    config = load_train_config("harness_math")
    assert config.harness is not None and config.harness["name"] == "mini_swe_agent"
    assert config.harness["config"] == "mini_swe_agent_math.yaml"  # the config the project ships
    served = load_config([*config.service_overrides, "llm.backends=[http://127.0.0.1:1/v1]"])
    task = served.tasks[config.task or ""]
    assert task.aliases == [] and task.options["domain"] == "math"
    assert task.options["harness"]["config"] == "mini_swe_agent_math.yaml"
    # The built-in math task's budgets bound the harness's rollouts too.
    assert task.options["agent"] == {"max_turns": 3, "max_time_s": 300}
    layout = SimpleNamespace(model_dir="/models/m")
    service = SimpleNamespace(url="http://svc", token="t")
    job = grpo_job(config, layout, service, prompts=Path("p.jsonl"), output_dir=Path("o"))  # type: ignore[arg-type]
    assert job.task == config.task and job.segment_slots == 1


def test_a_swe_run_serves_the_swe_domain_through_the_harness_and_draws_every_row_from_the_swe_split() -> None:
    config = load_train_config("harness_swe")
    assert config.swe is not None and config.task == "swe_harness"
    assert config.task_rows() is config.swe and config.demonstration_tasks is config.swe
    served = load_config([*config.service_overrides, "llm.backends=[http://127.0.0.1:1/v1]"])
    task = served.tasks["swe_harness"]
    assert task.options["domain"] == "swe" and task.options["harness"]["config"] == "mini_swe_agent_swe.yaml"
    assert task.options["agent"] == {"max_turns": 6, "max_time_s": 600}
    with pytest.raises(TrainConfigError, match="set `harness`"):
        load_train_config("harness_swe", ["harness=null"])


def test_a_harness_is_named_or_given_its_options_and_a_wrong_one_is_refused() -> None:
    named = load_train_config("default", ["harness=mini_swe_agent"])
    given = load_train_config(
        "default", ["harness.name=mini_swe_agent", "harness.config=swebench_backticks.yaml"]
    )
    assert named.harness is not None and named.harness["config"] == "mini_swe_agent_math.yaml"
    assert given.harness is not None and given.harness["config"] == "swebench_backticks.yaml"
    assert load_train_config("default").task is None  # the built-in loop: rows pick their task
    with pytest.raises(TrainConfigError, match="unknown harness 'claude'"):
        load_train_config("default", ["harness=claude"])
    with pytest.raises(TrainConfigError, match="environment"):
        load_train_config("default", ["harness=mini_swe_agent", "environment=gsm8k"])


def test_the_trainers_device_is_validated_and_reaches_both_trainer_jobs() -> None:
    config = load_train_config("default", ["device=cuda"])
    layout = SimpleNamespace(model_dir="/models/m")
    service = SimpleNamespace(url="http://svc", token="t")
    grpo = grpo_job(config, layout, service, prompts=Path("p.jsonl"), output_dir=Path("o"))  # type: ignore[arg-type]
    sft = sft_job(config, layout, demonstrations=Path("d.jsonl"), output_dir=Path("o"))  # type: ignore[arg-type]
    assert config.device == grpo.device == sft.device == "cuda"
    assert load_train_config("default").device == "auto"
    with pytest.raises(TrainConfigError, match="device"):
        load_train_config("default", ["device=tpu"])
