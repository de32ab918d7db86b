# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""A generated instance's repository, built when it is first needed.

Hundreds of instances share a few projects, so no repository is kept per instance at
generation time: the recipe (project, file, mutation site) and the cached upstream tree rebuild
it exactly (fixed commit dates: the same `base_commit`), once, under `generated/repos/`."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from nemo_gym_prorl.tasks.swe.config import SweConfig
from nemo_gym_prorl.tasks.swe.mutations import apply_site
from nemo_gym_prorl.tasks.swe.projects import Project, copy_upstream, load_projects, upstream_tree
from nemo_gym_prorl.tasks.swe.sdist_repo import InstanceRepo, make_instance_repo
from nemo_gym_prorl.tasks.swe.store import GeneratedRecipe


def find_project(name: str, version: str) -> Project:
    for project in load_projects():
        if project.project == name and project.version == version:
            return project
    raise LookupError(f"{name}=={version} is not in projects.json")


def read_source(path: Path) -> str:
    # newline="": keep the file's own line ends, so only the mutated text differs
    with path.open(encoding="utf-8", newline="") as f:
        return f.read()


def write_source(path: Path, text: str) -> None:
    with path.open("w", encoding="utf-8", newline="") as f:
        f.write(text)


def build_generated_repo(
    config: SweConfig, recipe: GeneratedRecipe, instance_id: str, dest: Path
) -> InstanceRepo:
    """The instance repository at `dest` (which must not exist): upstream copy, mutation, one commit."""
    tree = upstream_tree(find_project(recipe.project, recipe.version), config)
    copy_upstream(tree, dest)

    def introduce_bug(repo: Path) -> None:
        path = repo / recipe.file
        write_source(path, apply_site(read_source(path), recipe.site))

    return make_instance_repo(dest, recipe.hidden_test_files, introduce_bug, instance_id)


def ensure_repo(config: SweConfig, row: Mapping[str, Any]) -> None:
    """Build a generated instance's repository if it is not there yet (no-op for other rows).
    Concurrent callers each build into a private folder; the first rename wins."""
    raw = row.get("recipe")
    if not isinstance(raw, Mapping) or not raw.get("generator"):
        return
    repo = config.offline_repo(row)
    if (repo / ".git").is_dir():
        return
    recipe = GeneratedRecipe.model_validate(raw)
    repo.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".build-", dir=repo.parent) as tmp:
        staged = Path(tmp) / "repo"
        built = build_generated_repo(config, recipe, str(row["instance_id"]), staged)
        if row.get("base_commit") and built.base_commit != row["base_commit"]:
            raise RuntimeError(
                f"{row['instance_id']}: rebuilt base_commit {built.base_commit[:12]} != recorded "
                f"{str(row['base_commit'])[:12]} (projects.json or the sdist changed)"
            )
        try:
            staged.rename(repo)
        except OSError:
            if not (repo / ".git").is_dir():
                raise
            shutil.rmtree(staged, ignore_errors=True)  # another caller built it first
