# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""What the demonstrator writes: a kept `Demonstration` (with the `Recipe` that made it) and
the `DemonstrationSummary` of a run. Read back by SFT through `read_demonstrations`."""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from nemo_gym_prorl.training.heldout import DemonstratedFamily

ORIGIN = "program-written demonstration"
# The program that writes them (`demonstrations.py`), recorded in every recipe. Spelled from the
# package: it names a program in the data, it is not an import of that module.
PROGRAM = f"{__package__}.demonstrations"


class Recipe(BaseModel):
    """How a demonstration was made: reproducible from these fields and the split (a math task:
    its family and seed; a SWE instance: `family` swe and its id)."""

    family: DemonstratedFamily | Literal["swe"]
    seed: int | None = None
    instance_id: str | None = None
    split: Literal["train", "heldout"]
    program: str = PROGRAM

    @model_validator(mode="after")
    def _names_its_task(self) -> Recipe:
        if (self.family == "swe") != (self.instance_id is not None) or (self.family == "swe") == (
            self.seed is not None
        ):
            raise ValueError("a math recipe names its seed, a SWE recipe its instance_id (and not the other)")
        return self

    @property
    def task(self) -> str:
        return self.instance_id if self.instance_id is not None else f"{self.family}-{self.seed}"


class Demonstration(BaseModel):
    """One kept demonstration, in the shape TRL's `rollout_func` returns a rollout: the first
    turn's prompt ids, everything after it as completion ids, and `env_mask` (1 on the tokens the
    assistant wrote, 0 on the template's and the tools' tokens)."""

    model_config = ConfigDict(extra="forbid")

    origin: Literal["program-written demonstration"] = ORIGIN
    recipe: Recipe
    task_id: str
    data_source: str
    messages: list[dict[str, Any]]
    prompt_ids: list[int]
    completion_ids: list[int]
    env_mask: list[int]
    reward: float
    reward_components: dict[str, float]
    model: str = Field(description="the served model whose tokenizer and template made the ids")
    tool_call_format: str
    turns: int
    tool_calls: int

    @model_validator(mode="after")
    def _aligned(self) -> Demonstration:
        if len(self.env_mask) != len(self.completion_ids):
            raise ValueError(
                f"{len(self.completion_ids)} completion ids but {len(self.env_mask)} mask entries"
            )
        if set(self.env_mask) - {0, 1}:
            raise ValueError("env_mask holds values other than 0 and 1")
        return self

    @property
    def model_token_count(self) -> int:
        return sum(self.env_mask)


class TokenStats(BaseModel):
    min: int = 0
    mean: float = 0.0
    max: int = 0

    @classmethod
    def of(cls, values: Iterable[int]) -> TokenStats:
        values = list(values)
        if not values:
            return cls()
        return cls(min=min(values), mean=round(statistics.fmean(values), 1), max=max(values))


class DemonstrationSummary(BaseModel):
    """What `write_demonstrations` did (for `prorl train`'s log and its results file)."""

    path: str
    requested: int
    kept: int
    tried: int
    keep_rate: float
    dropped: dict[str, int] = Field(description="why a tried task was not kept -> how many")
    families: dict[str, int]
    seconds: float
    seconds_per_demonstration: float = Field(description="wall-clock per tried task")
    prompt_tokens: TokenStats
    completion_tokens: TokenStats
    model_tokens: TokenStats = Field(description="completion tokens the assistant wrote (env_mask 1)")
