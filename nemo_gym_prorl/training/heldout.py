# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Training and held-out math tasks, generated from seeds that never meet.

Every task is one reasoning-gym entry, named by its recipe `(family, seed)`: entry 0 of the
family's dataset seeded `seed` (reasoning-gym seeds entry i of a dataset seeded S with S + i,
so a seed is one task). The split gives each side its own seed range,

    train     seeds [train_seed_start, heldout_seed_start)
    held-out  seeds [heldout_seed_start, heldout_seed_start + ceil(heldout_size / families))

and families take turns (task k is family k mod F, seed start + k // F). Disjoint seeds are not
enough on their own: the easy families have small question spaces (two one-digit terms give a
few hundred distinct sums), so different seeds repeat questions. A training task whose question
is also a held-out question is therefore skipped, and the held-out set measures tasks the
policy has never been trained on. Demonstrations, the RL prompts and the held-out evaluation
all draw their rows here.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from functools import cached_property
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from nemo_gym_prorl.datasets.rows import DEFAULT_AGENT
from nemo_gym_prorl.datasets.sources import REASONING_GYM_MATH, math_row, reasoning_gym_problem

# The families a program can demonstrate (see `demonstrations.PROGRAMS`) and a 135M model can
# learn to solve with the tool: the task's inputs are copied into one line of Python.
Family = Literal["basic_arithmetic", "gcd", "lcm", "fraction_simplification", "simple_equations"]
DEFAULT_FAMILIES: tuple[Family, ...] = ("basic_arithmetic", "gcd", "lcm", "fraction_simplification")

Split = Literal["train", "heldout"]


class SeedSplit(BaseModel):
    """Which task families, and the seed ranges of training and held-out tasks."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    families: tuple[Family, ...] = Field(DEFAULT_FAMILIES, min_length=1)
    train_seed_start: int = Field(0, ge=0, description="First training seed of every family.")
    heldout_seed_start: int = Field(
        1_000_000, ge=1, description="First held-out seed; training seeds stay below it."
    )
    heldout_size: int = Field(64, ge=64, description="Held-out tasks (at least 64: an evaluation's sample).")
    agent: str = Field(DEFAULT_AGENT, description="The rows' `agent_ref` name.")

    @model_validator(mode="after")
    def _disjoint(self) -> SeedSplit:
        if len(set(self.families)) != len(self.families):
            raise ValueError(f"families repeat: {list(self.families)}")
        if self.train_seed_start >= self.heldout_seed_start:
            raise ValueError(
                f"train_seed_start ({self.train_seed_start}) must be below heldout_seed_start "
                f"({self.heldout_seed_start}): training seeds are the ones before the held-out range"
            )
        return self

    @property
    def heldout_seeds_per_family(self) -> int:
        return math.ceil(self.heldout_size / len(self.families))

    def recipe(self, split: Split, index: int) -> tuple[Family, int]:
        """The `(family, seed)` of task `index` of a split (before training skips repeats)."""
        if index < 0:
            raise ValueError(f"task index must be >= 0, got {index}")
        family = self.families[index % len(self.families)]
        offset = index // len(self.families)
        if split == "heldout":
            if index >= self.heldout_size:
                raise IndexError(f"the held-out set has {self.heldout_size} tasks, no task {index}")
            return family, self.heldout_seed_start + offset
        seed = self.train_seed_start + offset
        if seed >= self.heldout_seed_start:
            raise IndexError(
                f"training seeds run out at {self.heldout_seed_start} (the held-out range starts there)"
            )
        return family, seed

    @cached_property
    def _heldout(self) -> list[dict[str, Any]]:
        return [self.row("heldout", *self.recipe("heldout", i)) for i in range(self.heldout_size)]

    @cached_property
    def _heldout_questions(self) -> frozenset[tuple[str, str]]:
        return frozenset((row["reasoning_gym"]["family"], _question(row)) for row in self._heldout)

    def heldout_rows(self) -> list[dict[str, Any]]:
        """The held-out set: `heldout_size` rows, the same on every call."""
        return [dict(row) for row in self._heldout]

    def train_rows(self, n: int, start: int = 0) -> list[dict[str, Any]]:
        """Training rows `start` .. `start + n - 1` (in the order `iter_train_rows` yields them)."""
        if n < 0 or start < 0:
            raise ValueError(f"n and start must be >= 0, got n={n}, start={start}")
        rows: list[dict[str, Any]] = []
        for position, row in enumerate(self.iter_train_rows()):
            if position >= start + n:
                break
            if position >= start:
                rows.append(row)
        return rows

    def iter_train_rows(self) -> Iterator[dict[str, Any]]:
        """Training rows in recipe order, without the ones whose question is held out."""
        index = 0
        while True:
            try:
                family, seed = self.recipe("train", index)
            except IndexError:
                return
            index += 1
            row = self.row("train", family, seed)
            if (family, _question(row)) not in self._heldout_questions:
                yield row

    def row(self, split: Split, family: Family, seed: int) -> dict[str, Any]:
        """The math row of one recipe. It carries `reasoning_gym: {family, seed, metadata}`
        (the generator's record of the task's inputs) and the split it belongs to."""
        import reasoning_gym  # slow import (seconds): only when rows are made

        if family not in REASONING_GYM_MATH:
            raise ValueError(f"unknown reasoning-gym family {family!r}")
        entry = reasoning_gym.create_dataset(family, size=1, seed=seed, **REASONING_GYM_MATH[family])[0]
        problem = reasoning_gym_problem(family, entry, f"rg-{family}-s{seed}")
        return math_row(
            problem,
            self.agent,
            reasoning_gym={"family": family, "seed": seed, "metadata": problem["metadata"]},
            split=split,
        )


def _question(row: dict[str, Any]) -> str:
    return str(row["responses_create_params"]["input"][-1]["content"])
