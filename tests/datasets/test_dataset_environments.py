# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Every dataset environment: its committed files are what the catalog writes, its upstream sample
prepares into train/validation rows, and NeMo Gym validates it with those rows in place."""

from __future__ import annotations

import csv
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from nemo_gym_prorl.assets import project_root
from nemo_gym_prorl.cli import main
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
    assert sync_readme(project_root() / "docs" / "datasets.md", list(catalog().values()), check=True) is False


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


BROKEN_SOURCES = {
    "cut.jsonl": b'{"question": "What is 2+2?", "answer": "2+2=4\\n#### 4"}\n{"question": "What is 3',
    "open_quote.csv": b'question,answer\n"What is 2+2?,4\n',
    "not_parquet.parquet": bytes(range(256)) * 2,
}


@pytest.mark.parametrize("name", list(BROKEN_SOURCES))
def test_a_malformed_source_file_is_one_clear_line_from_the_cli_and_no_traceback(
    tmp_path: Path, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / name
    source.write_bytes(BROKEN_SOURCES[name])
    code = main(
        ["data", "prepare", "--environment", "gsm8k", "--source", str(source), "--out", str(tmp_path / "out")]
    )
    err = capsys.readouterr().err
    assert code == 1
    messages = [line for line in err.splitlines() if line.startswith("prorl data prepare:")]
    assert len(messages) == 1 and str(source) in messages[0], err
    assert "Traceback" not in err and "Failed to read" not in err  # nor datasets' own log of it
    assert not (tmp_path / "out").exists()


# The columns of the CSV GPQA publishes (gpqa_diamond.csv, Idavidrein/gpqa), in its order.
_VALIDATOR = (
    "Feedback",
    "Validator Revision Suggestion",
    "Is First Validation",
    "Post hoc agreement",
    "Sufficient Expertise?",
    "Understand the question?",
    "Question Difficulty",
    "Validator Answered Correctly",
    "Self-reported time (minutes)",
    "Probability Correct",
    "Manual Correctness Adjustment",
    "Expert Validator",
)
_NON_EXPERT = (
    "Feedback",
    "Validator Answered Correctly",
    "Explanation",
    "Self-reported time (minutes)",
    "Websites visited",
    "Probability Correct",
    "Manual Correctness Adjustment",
    "Non-Expert Validator",
)
GPQA_COLUMNS = [
    "Pre-Revision Question", "Pre-Revision Correct Answer", "Pre-Revision Incorrect Answer 1",
    "Pre-Revision Incorrect Answer 2", "Pre-Revision Incorrect Answer 3", "Pre-Revision Explanation",
    "Self-reported question-writing time (minutes)", "Question", "Correct Answer", "Incorrect Answer 1",
    "Incorrect Answer 2", "Incorrect Answer 3", "Explanation", "Revision Comments (from Question Writer)",
    "Subdomain", "Writer's Difficulty Estimate", "Extra Revised Question", "Extra Revised Explanation",
    "Extra Revised Correct Answer", "Extra Revised Incorrect Answer 1", "Extra Revised Incorrect Answer 2",
    "Extra Revised Incorrect Answer 3", "Non-Expert Validator Accuracy", "Majority Non-Expert Vals Incorrect",
    "Expert Validator Accuracy", "Record ID", "High-level domain", "Question Writer",
    *(f"{c}_EV_{i}" for i in (1, 2) for c in _VALIDATOR),
    *(f"{c}_NEV_{i}" for i in (1, 2, 3) for c in _NON_EXPERT),
    "Expert Validator Disagreement Category", "Canary String",
]  # fmt: skip


def gpqa_csv(rows: int, delimiter: str = ",") -> str:
    """GPQA's published layout: every column, most of them empty or numbers, and questions and
    explanations spanning lines, with commas and quotes inside their quoted cells."""
    out = io.StringIO()
    writer = csv.DictWriter(out, GPQA_COLUMNS, delimiter=delimiter, lineterminator="\r\n")
    writer.writeheader()
    for i in range(rows):
        writer.writerow({
            "Pre-Revision Question": f"What is {i} + 1?", "Pre-Revision Correct Answer": str(i + 1),
            "Question": f'A "simple" sum, step by step:\n\nWhat is {i} + 1, in base ten?',
            "Correct Answer": str(i + 1), "Incorrect Answer 1": f"{i + 2}, or more",
            "Incorrect Answer 2": str(i + 3), "Incorrect Answer 3": str(i + 4),
            "Explanation": f"Count on from {i}:\n{i}, then {i + 1}.", "Subdomain": "Arithmetic",
            "Record ID": f"rec{i}", "High-level domain": "Mathematics", "Expert Validator Accuracy": "1.0",
            "Is First Validation_EV_1": "True", "Canary String": "BENCHMARK DATA SHOULD NEVER APPEAR",
        })  # fmt: skip
    return out.getvalue()


@pytest.mark.parametrize(("filename", "delimiter"), [("gpqa_diamond.csv", ","), ("gpqa.tsv", "\t")])
def test_the_published_gpqa_csv_and_a_tsv_prepare_as_they_are(
    tmp_path: Path, filename: str, delimiter: str
) -> None:
    source = tmp_path / filename
    source.write_text(gpqa_csv(5, delimiter))
    prepared = prepare_environment("gpqa_diamond", str(source), data_dir=tmp_path / "data")
    assert (prepared.train_rows, prepared.validation_rows) == (4, 1)
    rows = [*read_jsonl(prepared.train_path), *read_jsonl(prepared.validation_path)]
    prompts = sorted(str(r["responses_create_params"]["input"]) for r in rows)
    assert all('A \\"simple\\" sum' in p or 'A "simple" sum' in p for p in prompts), prompts[0]
    assert any("in base ten?" in p and "2, or more" in p for p in prompts)  # the whole quoted cells


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
    readme = (project_root() / "docs" / "datasets.md").read_text()
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


def readme_data_commands() -> list[list[str]]:
    """The README's `prorl data` command lines, as written (their comments dropped)."""
    readme = (project_root() / "docs" / "datasets.md").read_text()
    lines = [line.split("#")[0].split() for line in readme.splitlines()]
    return [words for words in lines if words[:3] == [".venv/bin/prorl", "data", "prepare"]
            or words[:3] == [".venv/bin/prorl", "data", "environments"]]  # fmt: skip


def test_the_readme_data_commands_run_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """In a fresh directory holding the local copy the README names (GSM8K's train split as
    parquet, made from the environment's sample). The Hub command has no network here: it is
    refused in one line naming the dataset, as a user offline would see it."""
    import datasets

    commands = readme_data_commands()
    assert len(commands) >= 3, commands
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf-cache"))
    (tmp_path / "gsm8k").mkdir()
    datasets.Dataset.from_list(list(read_jsonl(sample_path("gsm8k")))).to_parquet("gsm8k/train.parquet")
    for words in commands:
        args = words[1:]
        code = main(args)
        err = capsys.readouterr().err
        if args[:2] == ["data", "prepare"] and "--source" not in args:
            assert code == 1 and "Traceback" not in err, err  # the Hub, offline
            assert err.count("prorl data prepare:") == 1 and "openai/gsm8k" in err, err
            continue
        assert code == 0, (words, err)
    assert (tmp_path / "data" / "gsm8k" / "train.jsonl").is_file()
    assert (tmp_path / "data" / "gsm8k" / "validation.jsonl").stat().st_size > 0


def test_preparing_shows_the_conversion_as_it_goes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name = "gsm8k"
    prepare_environment(
        name, str(sample_path(name)), data_dir=tmp_path, validation_fraction=0.3, progress=True
    )
    shown = capsys.readouterr().err
    assert f"{name} (" in shown and " records" in shown  # its label, count and rate, on standard error
    prepare_environment(name, str(sample_path(name)), data_dir=tmp_path, validation_fraction=0.3)
    assert " records" not in capsys.readouterr().err  # quiet unless asked
