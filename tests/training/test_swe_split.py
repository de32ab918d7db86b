# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The SWE split: each project's generated instances in a fixed order, two held-out sets and the
training instances never sharing one, RL projects never demonstrated, rows without a gold patch,
and too few instances refused saying how to generate them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nemo_gym_prorl.tasks.swe import SweConfig
from nemo_gym_prorl.training.swe_split import SweInstancesMissing, SweSplit


def generated(cache: Path, counts: dict[str, int]) -> SweConfig:
    """A generator's cache holding `counts[project]` instances of each project."""
    config = SweConfig(cache_dir=cache)
    config.generated_dir.mkdir(parents=True)
    lines = [
        json.dumps({
            "instance_id": f"gen__{project}-{i}", "repo": project, "version": "1", "base_commit": "abc",
            "problem_statement": f"{project} bug {i}", "patch": "GOLD", "test_patch": "HIDDEN",
            "recipe": {"generator": "ast-mutation/1", "project": project},
        })
        for project, n in counts.items() for i in range(n)
    ]  # fmt: skip
    (config.generated_dir / "instances.jsonl").write_text("\n".join(lines) + "\n")
    return config


def ids(rows: list[dict]) -> set[str]:
    return {row["instance_id"] for row in rows}


def test_tuning_test_and_training_instances_never_meet_and_training_is_the_same_for_both(
    tmp_path: Path,
) -> None:
    config = generated(tmp_path, {"toolz": 12, "semver": 12, "inflection": 12})
    tuning = SweSplit(
        projects=("toolz", "semver"), rl_projects=("inflection",), per_project_heldout=3, swe=config
    )
    test = tuning.model_copy(update={"heldout_set": "test"})
    assert len(tuning.heldout_rows()) == len(test.heldout_rows()) == 9
    train = ids(list(tuning.iter_train_rows())) | ids(tuning.train_rows(6, families=("inflection",)))
    assert not ids(tuning.heldout_rows()) & ids(test.heldout_rows())
    assert not train & (ids(tuning.heldout_rows()) | ids(test.heldout_rows()))
    assert tuning.train_rows(6) == test.train_rows(6)
    assert {tuning.family(r) for r in tuning.train_rows(6)} == {"toolz", "semver"}  # demonstrated only
    assert all(r["split"] == "heldout" for r in tuning.heldout_rows())


def test_rows_carry_no_gold_patch_or_hidden_test(tmp_path: Path) -> None:
    config = generated(tmp_path, {"toolz": 8})
    rows = SweSplit(projects=("toolz",), per_project_heldout=2, swe=config).heldout_rows()
    assert rows and not any("GOLD" in json.dumps(r) or "HIDDEN" in json.dumps(r) for r in rows)


def test_grpo_prompts_mix_the_rl_projects_with_rehearsal_of_the_demonstrated_ones(tmp_path: Path) -> None:
    config = generated(tmp_path, {"toolz": 20, "inflection": 20})
    split = SweSplit(projects=("toolz",), rl_projects=("inflection",), per_project_heldout=2, swe=config)
    rows = split.grpo_rows(steps=2, prompts_per_step=3, demonstrations_tried=4, rehearsal=1)
    assert [split.family(r) for r in rows] == ["inflection", "inflection", "toolz"] * 2
    assert not ids(rows) & ids(split.train_rows(4))  # rehearsal comes after the demonstrated instances


def test_too_few_instances_are_refused_saying_how_to_generate_them(tmp_path: Path) -> None:
    config = generated(tmp_path, {"toolz": 3})
    with pytest.raises(SweInstancesMissing, match="prorl swe build --generate --only-projects toolz"):
        SweSplit(projects=("toolz",), per_project_heldout=2, swe=config).heldout_rows()
    enough = SweSplit(projects=("toolz",), per_project_heldout=1, swe=config)
    with pytest.raises(SweInstancesMissing, match="--per-project"):
        enough.train_rows(5)
