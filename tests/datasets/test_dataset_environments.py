# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Every dataset environment: its committed files are what the catalog writes, its upstream sample
prepares into train/validation rows, and NeMo Gym validates it with those rows in place."""

from __future__ import annotations

from pathlib import Path

import pytest

from nemo_gym_prorl.assets import project_root
from nemo_gym_prorl.datasets.catalog import RecordError
from nemo_gym_prorl.datasets.environment_files import SAMPLE, environment_dir, sync_readme, write_environment
from nemo_gym_prorl.datasets.environments import catalog, environment
from nemo_gym_prorl.datasets.loading import SourceError
from nemo_gym_prorl.datasets.prepare import prepare_environment
from nemo_gym_prorl.datasets.rows import read_jsonl

NAMES = sorted(catalog())


def sample_path(name: str) -> Path:
    return environment_dir(project_root(), environment(name)) / SAMPLE


@pytest.mark.parametrize("name", NAMES)
def test_committed_files_are_what_the_catalog_writes(name: str) -> None:
    assert write_environment(environment(name), project_root(), check=True) == []


@pytest.mark.parametrize("name", NAMES)
def test_sample_prepares_and_gym_validates_the_environment(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from nemo_gym.environment.validation import validate_environment

    monkeypatch.chdir(tmp_path)  # Gym resolves data/<name>/*.jsonl under the working directory
    monkeypatch.setenv("NEMO_GYM_EXTRA_ROOTS", str(project_root()))
    prepared = prepare_environment(name, str(sample_path(name)), validation_fraction=0.3)
    assert prepared.train_rows > 0 and prepared.validation_rows > 0
    rows = read_jsonl(prepared.train_path) + read_jsonl(prepared.validation_path)
    env = environment(name)
    assert {row["data_source"] for row in rows} == {f"prorl_{env.domain}"}
    assert all(row["dataset"] == name for row in rows)
    assert len({row["task_id"] for row in rows}) == len(rows), "task ids are unique"
    report = validate_environment(environment_dir(project_root(), env) / "manifest.yaml")
    assert not report.warnings
    assert {d.name: d.rows > 0 for d in report.datasets} == {
        f"{name}_example": True,
        f"{name}_train": True,
        f"{name}_validation": True,
    }
    assert report.inferred_profile == "custom-gym-agent-loop"


def test_the_readme_table_lists_every_environment() -> None:
    assert sync_readme(project_root() / "README.md", list(catalog().values()), check=True) is False


def test_unknown_environment_is_named_with_the_known_ones() -> None:
    with pytest.raises(KeyError, match=r"unknown dataset environment 'gsm9k'.*gsm8k"):
        environment("gsm9k")


def test_missing_source_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="no such file"):
        prepare_environment("gsm8k", str(tmp_path / "absent.jsonl"), data_dir=tmp_path)


def test_a_source_without_gradeable_records_writes_nothing(tmp_path: Path) -> None:
    source = tmp_path / "unanswered.jsonl"
    source.write_text('{"question": "What is 2+2?", "answer": "four, no final line"}\n')
    with pytest.raises(RecordError, match=r"no gradeable rows.*#### "):
        prepare_environment("gsm8k", str(source), data_dir=tmp_path / "data")
    assert not (tmp_path / "data").exists()
