# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The dataset environments: one entry per public dataset people train on.

An entry names the dataset (its Hub id, splits, licence, the schema its converter reads and
where that schema is published), the domain that grades it and the domain settings that suit it
(turn limit), and its converter: one published record -> one NeMo Gym row (`rows.make_row`).
`environments/<name>/` (manifest, config, prepare scripts, example rows) is written from these
entries by `prorl data environments`, so the catalog is the one source of truth. The entries
themselves live with their converters (`converters/`); `environments.catalog()` lists them.

A converter raises `RecordError` for a record it cannot turn into a gradeable row (no answer, no
tests); `prepare` skips and counts those, it never writes a row that cannot be graded.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Domain = Literal["math", "stem", "code", "swe"]

# The licences NeMo Gym 0.7 accepts on a train/validation dataset (`DatasetConfig.license`).
GymLicense = Literal[
    "Apache 2.0",
    "MIT",
    "Creative Commons Attribution 4.0 International",
    "Creative Commons Attribution-ShareAlike 4.0 International",
    "CC BY-SA 4.0",
    "CC BY-NC 3.0",
    "TBD",
    "GNU General Public License v3.0",
]


def content_id(*parts: str) -> str:
    """A stable id from a record's content, for datasets whose records carry none."""
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:12]


class RecordError(ValueError):
    """A published record that cannot become a gradeable row (the message says why)."""


Tools = list[dict[str, Any]]
Converter = Callable[[Mapping[str, Any], Tools, str], dict[str, Any]]


class DatasetEnvironment(BaseModel):
    """One public dataset as a NeMo Gym environment of this project."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    name: str = Field(pattern=r"^[a-z0-9_]+$", description="Environment name (environments/<name>/).")
    title: str = Field(description="The dataset's own name, for tables.")
    domain: Domain
    hub_id: str = Field(description="Hugging Face Hub id of the published dataset.")
    hub_subset: str | None = Field(None, description="The Hub config name, where it has several.")
    train_splits: tuple[str, ...] = Field(description="Published splits whose records become rows.")
    validation_split: str | None = Field(
        None,
        description="A published split kept for validation; None: a seeded fraction of the rows.",
    )
    published_rows: str = Field(description="Records per published split, e.g. '7,473 train, 1,319 test'.")
    license: str = Field(description="The dataset's licence as published.")
    gym_license: GymLicense = Field(description="The nearest licence NeMo Gym's config accepts.")
    schema_source: str = Field(description="Where the record schema is published (URL at a version).")
    needs: str = Field("", description="What running it needs beyond `make setup`.")
    max_turns: int = Field(8, ge=1, description="Model calls per rollout for this dataset.")
    convert: Converter

    def rows(self, record: Mapping[str, Any], tools: Tools, agent: str) -> dict[str, Any]:
        row = self.convert(record, tools, agent)
        row["dataset"] = self.name
        return row
