# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""RL prompts and held-out tasks from a dataset environment (`prorl train environment=NAME`).

The environment's prepared rows (`prorl data prepare --environment NAME`) are the source: GRPO
prompts come from its train file in order, the held-out sets come from its validation file,
which the prepare step keeps apart from the train rows (the dataset's own test split, or a seeded
fraction): the tuning set is its head, the test set the `heldout_size` rows after it. Demonstrations stay program-written reasoning-gym tasks: a program can only
demonstrate tasks whose inputs it can read.
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from nemo_gym_prorl.datasets.prepare import DATA_DIR, split_path
from nemo_gym_prorl.datasets.rows import read_jsonl
from nemo_gym_prorl.training.heldout import HeldoutSet


class EnvironmentRowsMissing(FileNotFoundError):
    """The environment's rows were not prepared (the message says how to prepare them)."""


class EnvironmentSplit(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    environment: str
    heldout_size: int = Field(64, ge=64)
    heldout_set: HeldoutSet = "tuning"
    data_dir: Path = DATA_DIR

    def _rows(self, split: str) -> list[dict[str, Any]]:
        path = split_path(self.environment, split, self.data_dir)
        if not path.is_file():
            raise EnvironmentRowsMissing(
                f"{path} is missing: prepare it with `prorl data prepare --environment {self.environment}`"
            )
        return read_jsonl(path)

    @cached_property
    def _train(self) -> list[dict[str, Any]]:
        return self._rows("train")

    @cached_property
    def _heldout(self) -> list[dict[str, Any]]:
        rows = self._rows("validation")
        start = self.heldout_size if self.heldout_set == "test" else 0
        if len(rows) < start + self.heldout_size:
            raise ValueError(
                f"{self.environment}'s validation rows are {len(rows)}: its {self.heldout_set} set needs "
                f"{start + self.heldout_size}"
            )
        chosen = rows[start : start + self.heldout_size]
        held = {row["task_id"] for row in chosen}
        if any(row["task_id"] in held for row in self._train):
            raise ValueError(f"{self.environment}: a held-out task is also a training task")
        return chosen

    def family(self, row: dict[str, Any]) -> str:
        """Every row is the environment's: one family, never demonstrated."""
        return self.environment

    @property
    def demonstrated(self) -> frozenset[str]:
        return frozenset()

    def heldout_rows(self) -> list[dict[str, Any]]:
        return [dict(row) for row in self._heldout]

    def grpo_rows(
        self, steps: int, prompts_per_step: int, demonstrations_tried: int, rehearsal: int = 0
    ) -> list[dict[str, Any]]:
        """GRPO's prompts: the environment's train rows from its start (the demonstrations are
        reasoning-gym tasks, never these, so there is nothing to rehearse apart)."""
        return self.train_rows(steps * prompts_per_step)

    def train_rows(self, n: int, start: int = 0) -> list[dict[str, Any]]:
        rows = self._train[start : start + n]
        if len(rows) < n:
            raise ValueError(
                f"{self.environment} has {len(self._train)} training rows; {start + n} are needed"
            )
        return [dict(row) for row in rows]
