# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Training and held-out SWE instances, from the generator's cache (`prorl swe build --generate`).

The SWE counterpart of `heldout.SeedSplit`, with projects in the place of families:

- **demonstrated projects** (`projects`): a program demonstrates their training instances from
  the gold patch (`swe_programs`), and SFT imitates them;
- **RL projects** (`rl_projects`): no demonstration of any of their instances exists; only RL's
  own rewarded samples can teach them.

Each project's instances are ordered by a seeded hash of their id, a fixed order that does not
depend on the order the generator wrote them. Its first `per_project_heldout` are the **tuning
set**, the next as many the **test set**, the rest are training instances: the three never share
an instance, and which set a run evaluates on changes nothing it trains on. A row carries no gold
patch or hidden test (`swe_rows(compact=True)`): the service completes it from the cache.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from functools import cached_property
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from nemo_gym_prorl.datasets.rows import DEFAULT_AGENT
from nemo_gym_prorl.datasets.swe import swe_rows
from nemo_gym_prorl.tasks.swe import SweConfig
from nemo_gym_prorl.tasks.swe.store import load_generated
from nemo_gym_prorl.training.heldout import HeldoutSet, mixed_grpo_rows


class SweInstancesMissing(FileNotFoundError):
    """Too few generated instances of a project (the message says how to generate them)."""


class SweSplit(BaseModel):
    """Which projects, and how many of each project's instances are held out."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    projects: tuple[str, ...] = Field(min_length=1, description="Demonstrated projects (SFT, then RL).")
    rl_projects: tuple[str, ...] = Field(
        (), description="Projects without demonstrations: RL alone teaches them."
    )
    per_project_heldout: int = Field(8, ge=1, description="Instances of each project in each held-out set.")
    heldout_set: HeldoutSet = Field("tuning", description="The held-out set the run evaluates on.")
    seed: int = Field(0, description="Seeds the order of each project's instances.")
    agent: str = Field(DEFAULT_AGENT, description="The rows' `agent_ref` name.")
    swe: SweConfig = Field(default_factory=SweConfig, description="Where the generated instances are.")

    @model_validator(mode="after")
    def _disjoint(self) -> SweSplit:
        every = [*self.projects, *self.rl_projects]
        if len(set(every)) != len(every):
            raise ValueError(f"projects repeat: {every}")
        return self

    @property
    def demonstrated(self) -> frozenset[str]:
        return frozenset(self.projects)

    @property
    def rl_families(self) -> tuple[str, ...]:
        return self.rl_projects

    def family(self, row: dict[str, Any]) -> str:
        """The project a row of this split belongs to."""
        return self._project_of[str(row["instance_id"])]

    @cached_property
    def _ordered(self) -> dict[str, list[dict[str, Any]]]:
        """Each project's generated instances in the split's fixed order."""
        by_project: dict[str, list[dict[str, Any]]] = {p: [] for p in (*self.projects, *self.rl_projects)}
        for instance in load_generated(self.swe):
            project = (instance.get("recipe") or {}).get("project")
            if project in by_project:
                by_project[project].append(instance)
        needed = 2 * self.per_project_heldout + 1
        short = {p: len(found) for p, found in by_project.items() if len(found) < needed}
        if short:
            raise SweInstancesMissing(
                f"each project needs {needed} generated instances (two held-out sets and a training one); "
                f"found {short}: run `prorl swe build --generate --only-projects {' '.join(short)}`"
            )
        for found in by_project.values():
            found.sort(key=self._rank)
        return by_project

    def _rank(self, instance: dict[str, Any]) -> str:
        return hashlib.sha256(f"{self.seed}:{instance['instance_id']}".encode()).hexdigest()

    @cached_property
    def _project_of(self) -> dict[str, str]:
        return {str(i["instance_id"]): p for p, found in self._ordered.items() for i in found}

    def _rows(self, instances: list[dict[str, Any]], split: str) -> list[dict[str, Any]]:
        return [{**row, "split": split} for row in swe_rows(instances, agent=self.agent, compact=True)]

    def heldout_rows(self) -> list[dict[str, Any]]:
        """The held-out set the run evaluates on: the demonstrated projects' instances, then the RL projects'."""
        k = self.per_project_heldout
        start = k if self.heldout_set == "test" else 0
        chosen = [i for p in (*self.projects, *self.rl_projects) for i in self._ordered[p][start : start + k]]
        return self._rows(chosen, "heldout")

    def iter_train_rows(self, families: tuple[str, ...] | None = None) -> Iterator[dict[str, Any]]:
        """Training instances of `families` (default: the demonstrated projects), projects taking turns."""
        projects = families or self.projects
        queues = [self._ordered[p][2 * self.per_project_heldout :] for p in projects]
        for position in range(max(len(q) for q in queues)):
            for queue in queues:
                if position < len(queue):
                    yield self._rows([queue[position]], "train")[0]

    def train_rows(
        self, n: int, start: int = 0, families: tuple[str, ...] | None = None
    ) -> list[dict[str, Any]]:
        rows = list(self.iter_train_rows(families))[start : start + n]
        if len(rows) < n:
            raise SweInstancesMissing(
                f"{start + n} training instances of {list(families or self.projects)} are needed; "
                f"{start + len(rows)} were generated: generate more with `prorl swe build --generate --per-project N`"
            )
        return rows

    def grpo_rows(
        self, steps: int, prompts_per_step: int, demonstrations_tried: int, rehearsal: int = 0
    ) -> list[dict[str, Any]]:
        """GRPO's prompts, step after step: the RL projects' training instances, and `rehearsal`
        of each step's from the demonstrated projects, after the ones demonstrated."""
        return mixed_grpo_rows(self, steps, prompts_per_step, demonstrations_tried, rehearsal)
