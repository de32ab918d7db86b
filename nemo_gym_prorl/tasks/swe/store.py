# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Where generated SWE instances are kept, and their recipes.

`${PRORL_HOME:-~/.cache/prorl}/swe/generated/`:
  instances.jsonl   the kept instances (SWE-bench fields plus `recipe`)
  candidates.jsonl  every candidate tried and what became of it, so a rerun tries only new ones
  baselines/        each project's test statuses and which functions each test ran
  upstream/         each project's unpacked sdist (never modified)
  repos/            instance repositories, built on first use from upstream + recipe
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from nemo_gym_prorl.tasks.swe.config import SweConfig
from nemo_gym_prorl.tasks.swe.mutations import Site

GENERATOR = "ast-mutation/1"


class GeneratedRecipe(BaseModel):
    """Everything needed to rebuild a generated instance's repository and patches."""

    generator: str = GENERATOR
    project: str
    version: str
    file: str = Field(description="The mutated file, relative to the repository.")
    function: str
    kind: str
    site: Site
    seed: int
    hidden_test_files: list[str]
    pythonpath: list[str]


def instances_path(config: SweConfig) -> Path:
    return config.generated_dir / "instances.jsonl"


def candidates_path(config: SweConfig) -> Path:
    return config.generated_dir / "candidates.jsonl"


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def append_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)


def load_generated(config: SweConfig | None = None) -> list[dict[str, Any]]:
    """The generated instances in the cache (empty before `prorl swe build --generate`)."""
    return _read_jsonl(instances_path(config or SweConfig()))


def load_candidates(config: SweConfig) -> list[dict[str, Any]]:
    return _read_jsonl(candidates_path(config))


def is_generated(row: dict[str, Any]) -> bool:
    recipe = row.get("recipe")
    return isinstance(recipe, dict) and bool(recipe.get("generator"))
