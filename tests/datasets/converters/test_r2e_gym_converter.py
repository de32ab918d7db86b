# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""R2E-Gym records (environments/r2e_gym/data/upstream_sample.jsonl, written to R2E-Gym's
`DatasetRow` schema at 69bc953: JSON strings inside, a ParsedCommit of hunks, the hidden tests'
runs before and after the fix) become SWE-bench-graded rows run in R2E-Gym's own images."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from nemo_gym_prorl.assets import project_root
from nemo_gym_prorl.datasets.catalog import RecordError
from nemo_gym_prorl.datasets.converters.r2e_gym import gold_patch
from nemo_gym_prorl.datasets.environments import environment
from nemo_gym_prorl.datasets.rows import read_jsonl
from nemo_gym_prorl.tasks.swe.config import SweConfig
from nemo_gym_prorl.tasks.swe.evaluate import grade

START, END = ">>>>> Start Test Output", ">>>>> End Test Output"


def record(repo: str) -> dict[str, Any]:
    path = project_root() / "environments" / "r2e_gym" / "data" / "upstream_sample.jsonl"
    return next(r for r in read_jsonl(path) if r["repo_name"] == repo)


def convert(rec: dict[str, Any]) -> dict[str, Any]:
    return environment("r2e_gym").rows(rec, [], "prorl_agent")


def parsed_commit(rec: dict[str, Any]) -> dict[str, Any]:
    value = rec["parsed_commit_content"]
    return json.loads(value) if isinstance(value, str) else value


@pytest.mark.parametrize("repo", ["sympy", "pandas", "tornado", "aiohttp"])
def test_the_gold_patch_turns_every_fixed_file_from_its_old_content_into_its_new(
    tmp_path: Path, repo: str
) -> None:
    """The patch is rebuilt from the parsed hunks; applied by git to the commit's old files it
    must give exactly the new ones (non-test Python files only, as R2E-Gym's get_patch)."""
    rec = record(repo)
    diffs = parsed_commit(rec)["file_diffs"]
    fixed = [
        d
        for d in diffs
        if d["header"]["file"]["path"].endswith(".py") and "tests" not in d["header"]["file"]["path"]
    ]
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    for d in diffs:
        path = tmp_path / d["header"]["file"]["path"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(d["old_file_content"])
    patch = convert(rec)["patch"]
    (tmp_path / "gold.patch").write_text(patch)
    subprocess.run(["git", "apply", "gold.patch"], cwd=tmp_path, check=True, capture_output=True)
    for d in diffs:
        expected = d["new_file_content"] if d in fixed else d["old_file_content"]
        assert (tmp_path / d["header"]["file"]["path"]).read_text() == expected, d["header"]["file"]["path"]


def test_test_files_and_other_languages_stay_out_of_the_gold_patch() -> None:
    sympy = convert(record("sympy"))["patch"]
    assert "sympy/core/mod.py" in sympy and "test_mod.py" not in sympy
    pandas = convert(record("pandas"))["patch"]
    assert "@@ -2 +2 @@ def pad(s, width):" in pandas  # a range without a length
    assert "\\ No newline at end of file" in pandas and "whatsnew" not in pandas
    assert gold_patch({"file_diffs": []}) == ""


def test_test_lists_come_from_the_hidden_tests_runs_before_and_after_the_fix() -> None:
    row = convert(record("pandas"))
    assert row["FAIL_TO_PASS"] == ["r2e_tests/test_1.py::TestPad::test_pad_width"]
    assert row["PASS_TO_PASS"] == ["r2e_tests/test_1.py::TestPad::test_pad_empty"]
    # a test that still fails after the fix is in neither list (SWE-bench's resolution ignores it)
    assert not any("unicode" in t for t in row["FAIL_TO_PASS"] + row["PASS_TO_PASS"])
    tornado = convert(record("tornado"))  # the custom unittest runner's module::Class::method ids
    assert tornado["FAIL_TO_PASS"] == ["tornado.test.web_test::RedirectTest::test_permanent"]


def test_the_row_runs_in_the_records_image_at_the_fixs_parent_and_hides_the_tests_from_the_agent() -> None:
    rec = record("sympy")
    row = convert(rec)
    assert row["image"] == f"docker://namanjain12/sympy_final:{rec['commit_hash']}"
    assert (
        row["base_commit"] == f"{rec['commit_hash']}^"
        and row["instance_id"] == f"sympy__{rec['commit_hash']}"
    )
    assert row["hidden_dirs"] == ["/r2e_tests", "/testbed/r2e_tests"]
    assert row["patch_exclude"] == ["run_tests.sh", "r2e_tests"]
    script = row["eval_script"]
    assert (
        script.index("cp -a /r2e_tests r2e_tests") < script.index(START) < script.index("bash run_tests.sh")
    )
    assert script.index("bash run_tests.sh") < script.index(END)
    config = SweConfig(backend="apptainer")
    assert config.sandbox_spec(row, agent=True).hidden_dirs == row["hidden_dirs"]
    assert config.sandbox_spec(row).hidden_dirs == []


def test_the_issue_is_taken_from_between_its_tags() -> None:
    row = convert(record("sympy"))
    assert row["problem_statement"].startswith("**Title:** `sign(0)` returns -1 instead of 0")
    assert "[ISSUE]" not in json.dumps(row["responses_create_params"])
    untagged = convert(record("pandas"))["problem_statement"]
    assert untagged.startswith("Series.str.pad pads to one character less")


def test_json_fields_already_decoded_by_a_loader_are_read_as_they_are() -> None:
    rec = record("aiohttp")
    assert isinstance(rec["parsed_commit_content"], dict)
    assert convert(rec)["FAIL_TO_PASS"] == ["r2e_tests/test_1.py::test_is_ok_299"]


@pytest.mark.parametrize(
    ("repo", "reason"),
    [
        ("scrapy", "no FAIL_TO_PASS"),
        ("numpy", "no gold patch"),
        ("pyramid", "parsed_commit_content is not JSON"),
    ],
)
def test_records_that_cannot_be_graded_are_refused(repo: str, reason: str) -> None:
    with pytest.raises(RecordError, match=reason):
        convert(record(repo))


def test_a_row_is_resolved_when_its_listed_tests_pass_in_the_images_run() -> None:
    row = convert(record("sympy"))

    def log(lines: list[str]) -> str:
        return "\n".join(["+ cd /testbed", f"+ : '{START}'", *lines, f"+ : '{END}'", ""])

    tests = row["FAIL_TO_PASS"] + row["PASS_TO_PASS"]
    assert grade(row, log([f"PASSED {t}" for t in tests]), row["patch"])["resolved"] is True
    failing = [
        f"FAILED {row['FAIL_TO_PASS'][0]} - assert -1 == 0",
        *(f"PASSED {t}" for t in row["PASS_TO_PASS"]),
    ]
    assert grade(row, log(failing), row["patch"])["resolved"] is False


def test_each_instances_image_resolves_to_its_own_sif(tmp_path: Path) -> None:
    """R2E-Gym's images of one repository differ only by tag: a SIF name must keep it."""
    rec = record("sympy")
    row = convert(rec)
    other = tmp_path / "namanjain12_sympy_final_0000.sif"
    other.write_bytes(b"SIF")  # another instance's image
    config = SweConfig(backend="apptainer", sif_dir=tmp_path, cache_dir=tmp_path / "cache")
    assert config.resolve_image(row) == row["image"]  # not the other instance's SIF
    mine = tmp_path / f"namanjain12_sympy_final_{rec['commit_hash']}.sif"
    mine.write_bytes(b"SIF")
    assert config.resolve_image(row) == str(mine)
