# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Training and held-out math tasks, generated from seeds that never meet.

Every task is one reasoning-gym entry, named by its recipe `(family, seed)`: entry 0 of the
family's dataset seeded `seed` (reasoning-gym seeds entry i of a dataset seeded S with S + i,
so a seed is one task). The split gives each side its own seed range,

    train     seeds [train_seed_start, heldout_seed_start)
    tuning    seeds [heldout_seed_start, heldout_seed_start + ceil(heldout_size / families))
    test      seeds [test_seed_start, test_seed_start + ceil(heldout_size / families))

and families take turns (task k is family k mod F, seed start + k // F). Disjoint seeds are not
enough on their own: the easy families have small question spaces (two one-digit terms give a
few hundred distinct sums), so different seeds repeat questions. A training task whose question
is also a held-out question is therefore skipped, and the held-out set measures tasks the
policy has never been trained on. Demonstrations, the RL prompts and the held-out evaluation
all draw their rows here.

Two held-out sets, from disjoint seeds. The shipped settings (rehearsal, guidance, KL, learning
rates) were chosen on the tuning set, evaluated again and again; the test set is evaluated once
per recorded run, so its figure is not one the settings were fitted to. `heldout_set` picks the
one a run evaluates on; training skips the questions of both, so a run trains on the same rows
whichever it evaluates.

Two kinds of family. The demonstrated ones (`families`) are the ones a program demonstrates
(`programs.PROGRAMS`): SFT imitates them. The RL families (`rl_families`) have no demonstration
at all: no program writes one, SFT never sees one, and only GRPO's own samples, rewarded by the
grader, can teach them. Each kind has its own held-out tasks, so the report can credit a gain to
the phase that made it: SFT's on the demonstrated families, RL's beyond them.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from functools import cached_property
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, model_validator

from nemo_gym_prorl.datasets.rows import DEFAULT_AGENT
from nemo_gym_prorl.datasets.sources import (
    REASONING_GYM_MATH,
    REASONING_GYM_RL,
    math_row,
    reasoning_gym_problem,
)

# The families a program can demonstrate (see `programs.PROGRAMS`) and a 135M model can learn to
# solve with the tool: the task's inputs are copied into one line of Python.
DemonstratedFamily = Literal["basic_arithmetic", "gcd", "lcm", "fraction_simplification", "simple_equations"]
# Families no program demonstrates, for RL to learn from its own rewarded samples.
RLFamily = Literal[
    "chain_sum", "products", "decimal_chain_sum", "count_bits", "base_conversion", "leg_counting",
    "prime_factorization", "complex_arithmetic",
]  # fmt: skip
Family = DemonstratedFamily | RLFamily
DEFAULT_FAMILIES: tuple[DemonstratedFamily, ...] = (
    "basic_arithmetic",
    "gcd",
    "lcm",
    "fraction_simplification",
)
DEFAULT_RL_FAMILIES: tuple[RLFamily, ...] = ("chain_sum", "products")

Split = Literal["train", "heldout"]
HeldoutSet = Literal["tuning", "test"]


class SeedSplit(BaseModel):
    """Which task families, and the seed ranges of training and held-out tasks."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    families: tuple[DemonstratedFamily, ...] = Field(
        DEFAULT_FAMILIES, min_length=1, description="The demonstrated families (SFT, then RL)."
    )
    rl_families: tuple[RLFamily, ...] = Field(
        DEFAULT_RL_FAMILIES, description="Families without demonstrations: RL alone can teach them."
    )
    train_seed_start: int = Field(0, ge=0, description="First training seed of every family.")
    heldout_seed_start: int = Field(
        1_000_000, ge=1, description="First held-out seed; training seeds stay below it."
    )
    heldout_size: int = Field(
        64,
        ge=64,
        description="Held-out tasks of the demonstrated families (at least 64: an evaluation's sample).",
    )
    rl_heldout_size: int = Field(64, ge=64, description="Held-out tasks of the RL families.")
    test_seed_start: int = Field(
        2_000_000,
        ge=1,
        description="First seed of the test set (the tuning set starts at heldout_seed_start).",
    )
    heldout_set: HeldoutSet = Field(
        "tuning",
        description="The held-out set the run evaluates on: 'tuning' (the settings were chosen on it) or "
        "'test' (evaluated once per recorded run).",
    )
    agent: str = Field(DEFAULT_AGENT, description="The rows' `agent_ref` name.")

    @model_validator(mode="after")
    def _disjoint(self) -> SeedSplit:
        every = [*self.families, *self.rl_families]
        if len(set(every)) != len(every):
            raise ValueError(f"families repeat: {every}")
        if self.train_seed_start >= self.heldout_seed_start:
            raise ValueError(
                f"train_seed_start ({self.train_seed_start}) must be below heldout_seed_start "
                f"({self.heldout_seed_start}): training seeds are the ones before the held-out range"
            )
        tuning_end = self.heldout_seed_start + self._seeds_per_family
        if self.test_seed_start < tuning_end:
            raise ValueError(
                f"test_seed_start ({self.test_seed_start}) must be at or above {tuning_end}, where the "
                "tuning set's seeds end: the two held-out sets never share a seed"
            )
        return self

    @property
    def _seeds_per_family(self) -> int:
        return max(
            math.ceil(self.heldout_size / len(self.families)),
            math.ceil(self.rl_heldout_size / max(len(self.rl_families), 1)),
        )

    def heldout_seeds(self, heldout_set: HeldoutSet | None = None) -> tuple[int, int]:
        """The seed range `[start, end)` of a held-out set (default: the one the run evaluates on)."""
        start = (
            self.test_seed_start if (heldout_set or self.heldout_set) == "test" else self.heldout_seed_start
        )
        return start, start + self._seeds_per_family

    def family(self, row: dict[str, Any]) -> str:
        """The family a row of this split belongs to."""
        return str(row["reasoning_gym"]["family"])

    @property
    def demonstrated(self) -> frozenset[str]:
        return frozenset(self.families)

    def recipe(
        self, split: Split, index: int, families: tuple[Family, ...] | None = None
    ) -> tuple[Family, int]:
        """The `(family, seed)` of task `index` of a split over `families` (default: the
        demonstrated ones), before training skips repeats."""
        return self._recipe(split, index, families, self.heldout_set)

    def _recipe(
        self, split: Split, index: int, families: tuple[Family, ...] | None, heldout_set: HeldoutSet
    ) -> tuple[Family, int]:
        families = families or self.families
        if index < 0:
            raise ValueError(f"task index must be >= 0, got {index}")
        family = families[index % len(families)]
        offset = index // len(families)
        if split == "heldout":
            size = self.rl_heldout_size if families == self.rl_families else self.heldout_size
            if index >= size:
                raise IndexError(f"the held-out set of {list(families)} has {size} tasks, no task {index}")
            return family, self.heldout_seeds(heldout_set)[0] + offset
        seed = self.train_seed_start + offset
        if seed >= self.heldout_seed_start:
            raise IndexError(
                f"training seeds run out at {self.heldout_seed_start} (the held-out range starts there)"
            )
        return family, seed

    def _heldout_set(self, heldout_set: HeldoutSet) -> list[dict[str, Any]]:
        def recipes(families: tuple[Family, ...], size: int) -> list[tuple[Family, int]]:
            return [self._recipe("heldout", i, families, heldout_set) for i in range(size)]

        every = recipes(self.families, self.heldout_size)
        if self.rl_families:
            every += recipes(self.rl_families, self.rl_heldout_size)
        return [self.row("heldout", family, seed) for family, seed in every]

    @cached_property
    def _heldout(self) -> list[dict[str, Any]]:
        return self._heldout_set(self.heldout_set)

    @cached_property
    def _heldout_questions(self) -> frozenset[tuple[str, str]]:
        """Both held-out sets' questions: training never meets either."""
        other: HeldoutSet = "test" if self.heldout_set == "tuning" else "tuning"
        rows = [*self._heldout, *self._heldout_set(other)]
        return frozenset((row["reasoning_gym"]["family"], _question(row)) for row in rows)

    def heldout_rows(self) -> list[dict[str, Any]]:
        """The held-out set the run evaluates on (`heldout_set`), the same on every call:
        `heldout_size` rows of the demonstrated families, then `rl_heldout_size` rows of the RL
        families."""
        return [dict(row) for row in self._heldout]

    def train_rows(
        self, n: int, start: int = 0, families: tuple[Family, ...] | None = None
    ) -> list[dict[str, Any]]:
        """Training rows `start` .. `start + n - 1` of `families` (default: the demonstrated
        ones), in the order `iter_train_rows` yields them."""
        if n < 0 or start < 0:
            raise ValueError(f"n and start must be >= 0, got n={n}, start={start}")
        rows: list[dict[str, Any]] = []
        for position, row in enumerate(self.iter_train_rows(families)):
            if position >= start + n:
                break
            if position >= start:
                rows.append(row)
        return rows

    def grpo_rows(
        self, steps: int, prompts_per_step: int, demonstrations_tried: int, rehearsal: int = 0
    ) -> list[dict[str, Any]]:
        """GRPO's prompts, step after step. Tasks of the RL families, so that what RL learns there
        is what no demonstration showed; `rehearsal` of each step's prompts are tasks of the
        demonstrated families (after the ones the demonstrations tried), so that RL keeps
        rewarding what SFT taught: trained on the RL families alone, the policy forgot the
        demonstrated ones (gcd 0.56 -> 0.00, measured). With no RL families: the demonstrated
        families' tasks after the ones the demonstrations tried."""
        return mixed_grpo_rows(self, steps, prompts_per_step, demonstrations_tried, rehearsal)

    def iter_train_rows(self, families: tuple[Family, ...] | None = None) -> Iterator[dict[str, Any]]:
        """Training rows of `families` in recipe order, without the ones whose question is held out."""
        index = 0
        while True:
            try:
                family, seed = self.recipe("train", index, families)
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

        settings = {**REASONING_GYM_MATH, **REASONING_GYM_RL}
        if family not in settings:
            raise ValueError(f"unknown reasoning-gym family {family!r}")
        entry = reasoning_gym.create_dataset(family, size=1, seed=seed, **settings[family])[0]
        problem = reasoning_gym_problem(family, entry, f"rg-{family}-s{seed}")
        return math_row(
            problem,
            self.agent,
            reasoning_gym={"family": family, "seed": seed, "metadata": problem["metadata"]},
            split=split,
        )


class TrainingTasks(Protocol):
    """What GRPO's prompts are drawn from: a split's training rows, by family."""

    @property
    def rl_families(self) -> tuple[str, ...]: ...

    def train_rows(self, n: int, start: int = 0, families: Any = None) -> list[dict[str, Any]]: ...


def mixed_grpo_rows(
    tasks: TrainingTasks, steps: int, prompts_per_step: int, demonstrations_tried: int, rehearsal: int
) -> list[dict[str, Any]]:
    """Each step's prompts: the RL families' next training tasks, then `rehearsal` of the
    demonstrated families' (after the ones the demonstrations tried); without RL families, the
    demonstrated families' tasks after the demonstrations'."""
    if not tasks.rl_families:
        return tasks.train_rows(steps * prompts_per_step, start=demonstrations_tried)
    if not 0 <= rehearsal < prompts_per_step:
        raise ValueError(f"rehearsal must be in [0, {prompts_per_step}), got {rehearsal}")
    new = prompts_per_step - rehearsal
    fresh = tasks.train_rows(steps * new, families=tasks.rl_families)
    kept = tasks.train_rows(steps * rehearsal, start=demonstrations_tried)
    rows: list[dict[str, Any]] = []
    for step in range(steps):
        rows += fresh[step * new : (step + 1) * new] + kept[step * rehearsal : (step + 1) * rehearsal]
    return rows


def _question(row: dict[str, Any]) -> str:
    return str(row["responses_create_params"]["input"][-1]["content"])
