# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Every dataset environment: its committed files are what the catalog writes, its upstream sample
prepares into train/validation rows, and NeMo Gym validates it with those rows in place."""

from __future__ import annotations

import os
import subprocess
import sys
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


def test_a_truncated_jsonl_line_is_one_clear_error_naming_the_file(tmp_path: Path) -> None:
    source = tmp_path / "cut.jsonl"
    source.write_text('{"question": "What is 2+2?", "answer": "2+2=4\\n#### 4"}\n{"question": "What is 3')
    with pytest.raises(SourceError, match=r"cut\.jsonl is malformed"):
        prepare_environment("gsm8k", str(source), data_dir=tmp_path / "data")
    assert not (tmp_path / "data").exists()


GPQA_HEADER = "Question,Correct Answer,Incorrect Answer 1,Incorrect Answer 2,Incorrect Answer 3,Record ID"


def gpqa_csv(rows: int, delimiter: str = ",") -> str:
    lines = [GPQA_HEADER.replace(",", delimiter)]
    for i in range(rows):
        fields = [f"What is {i} + 1?", str(i + 1), str(i + 2), str(i + 3), str(i + 4), f"rec{i}"]
        lines.append(delimiter.join(fields))
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(("filename", "delimiter"), [("gpqa_diamond.csv", ","), ("gpqa.tsv", "\t")])
def test_the_published_gpqa_csv_and_a_tsv_prepare_as_they_are(
    tmp_path: Path, filename: str, delimiter: str
) -> None:
    source = tmp_path / filename
    source.write_text(gpqa_csv(5, delimiter))
    prepared = prepare_environment("gpqa_diamond", str(source), data_dir=tmp_path / "data")
    assert (prepared.train_rows, prepared.validation_rows) == (4, 1)


def test_a_folder_of_plain_files_without_a_card_is_one_split_whatever_the_config(tmp_path: Path) -> None:
    folder = tmp_path / "gpqa"
    folder.mkdir()
    (folder / "gpqa_diamond.csv").write_text(gpqa_csv(10))
    prepared = prepare_environment("gpqa_diamond", str(folder), data_dir=tmp_path / "data")
    assert prepared.train_rows + prepared.validation_rows == 10 and prepared.validation_rows >= 1


def test_a_small_source_still_gets_a_validation_row_and_a_single_row_is_refused(tmp_path: Path) -> None:
    two = tmp_path / "two.csv"
    two.write_text(gpqa_csv(2))
    prepared = prepare_environment("gpqa_diamond", str(two), data_dir=tmp_path / "data")
    assert (prepared.train_rows, prepared.validation_rows) == (1, 1)
    one = tmp_path / "one.csv"
    one.write_text(gpqa_csv(1))
    with pytest.raises(RecordError, match="no validation rows"):
        prepare_environment("gpqa_diamond", str(one), data_dir=tmp_path / "one")


def test_the_readme_gym_validate_command_runs_as_written(tmp_path: Path) -> None:
    """`gsm8k` is both a Gym benchmark and this environment: the README names the kind."""
    readme = (project_root() / "README.md").read_text()
    command = next(
        line.split("#")[0].split() for line in readme.splitlines() if "gym env validate gsm8k" in line
    )
    assert command[-2:] == ["--kind", "environment"]
    prepare_environment(
        "gsm8k", str(sample_path("gsm8k")), data_dir=tmp_path / "data", validation_fraction=0.3
    )
    gym = Path(sys.executable).with_name("gym")
    env = {**os.environ, "NEMO_GYM_EXTRA_ROOTS": str(project_root())}
    done = subprocess.run(
        [str(gym), *command[1:]], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "gsm8k_validation" in done.stdout
