# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""SWE converters read each dataset's published schema (environments/<name>/data/upstream_sample.jsonl)
into full `prorl_swe` rows: the grader's fields (eval script, test lists, log parser, image) present,
nothing hidden in what the policy sees, images mapped to Apptainer references or local SIFs, and
records that cannot be graded refused. No network, no containers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from nemo_gym_prorl.assets import project_root
from nemo_gym_prorl.datasets.catalog import RecordError
from nemo_gym_prorl.datasets.converters.swe import modified_files
from nemo_gym_prorl.datasets.environments import environment
from nemo_gym_prorl.datasets.rows import read_jsonl
from nemo_gym_prorl.tasks.swe.config import SweConfig
from nemo_gym_prorl.tasks.swe.evaluate import REQUIRED_FIELDS, grade

SWE_ENVS = (
    "swe_bench_verified",
    "swe_bench_lite",
    "swe_bench",
    "swe_gym",
    "swe_rebench",
    "swe_smith",
    "r2e_gym",
)
START, END = ">>>>> Start Test Output", ">>>>> End Test Output"


def sample(name: str) -> list[dict[str, Any]]:
    return read_jsonl(project_root() / "environments" / name / "data" / "upstream_sample.jsonl")


def convert(name: str, record: dict[str, Any]) -> dict[str, Any]:
    return environment(name).rows(record, [], "prorl_agent")


def by_id(name: str, instance_id: str) -> dict[str, Any]:
    return next(r for r in sample(name) if r["instance_id"] == instance_id)


def policy_text(row: dict[str, Any]) -> str:
    return json.dumps(row["responses_create_params"])


@pytest.mark.parametrize("name", SWE_ENVS)
def test_every_convertible_record_is_a_full_row_the_grader_accepts(name: str) -> None:
    rows = []
    for record in sample(name):
        try:
            rows.append(convert(name, record))
        except RecordError:
            continue
    assert len(rows) >= 4
    for row in rows:
        assert row["data_source"] == "prorl_swe" and row["dataset"] == name
        assert all(k in row for k in (*REQUIRED_FIELDS, "base_commit", "log_parser", "eval_type", "image"))
        assert row["FAIL_TO_PASS"] and isinstance(row["PASS_TO_PASS"], list)
        assert START in row["eval_script"] and END in row["eval_script"]
        assert row["image"].startswith("docker://")
        # the policy sees the issue, never the fix, the hidden tests or the test ids
        seen = policy_text(row)
        assert row["problem_statement"].splitlines()[0] in seen
        for hidden in (row["patch"], row["test_patch"], row.get("bug_patch", ""), row["eval_script"]):
            assert not hidden or hidden not in seen
        assert all(t not in seen for t in row["FAIL_TO_PASS"])


def test_swebench_keeps_the_published_eval_script_parser_and_image() -> None:
    record = by_id("swe_bench_verified", "django__django-11099")
    row = convert("swe_bench_verified", record)
    assert row["eval_script"] == record["eval_script"]
    assert row["log_parser"] == "parse_log_django"
    assert row["image"] == "docker://swebench/sweb.eval.x86_64.django_1776_django-11099:latest"
    assert row["FAIL_TO_PASS"] == record["FAIL_TO_PASS"]  # a list, kept


def test_swebench_test_lists_published_as_json_strings_become_lists() -> None:
    record = by_id("swe_bench_verified", "astropy__astropy-12907")
    assert isinstance(record["FAIL_TO_PASS"], str)
    row = convert("swe_bench_verified", record)
    assert row["FAIL_TO_PASS"] == json.loads(record["FAIL_TO_PASS"])
    assert row["PASS_TO_PASS"] == json.loads(record["PASS_TO_PASS"])


def test_swebench_image_follows_the_harness_naming_when_the_record_has_none() -> None:
    record = {k: v for k, v in by_id("swe_bench", "sympy__sympy-20590").items() if k != "image"}
    assert (
        convert("swe_bench", record)["image"]
        == "docker://swebench/sweb.eval.x86_64.sympy_1776_sympy-20590:latest"
    )


@pytest.mark.parametrize("name", ["swe_bench_verified", "swe_bench_lite", "swe_bench"])
def test_swebench_records_without_an_eval_script_or_fail_to_pass_are_refused(name: str) -> None:
    with pytest.raises(RecordError, match="no eval_script"):
        convert(name, by_id(name, "pallets__flask-4992"))  # the 2024 princeton-nlp schema
    with pytest.raises(RecordError, match="no FAIL_TO_PASS"):
        convert(name, by_id(name, "sympy__sympy-24213"))  # FAIL_TO_PASS "[]"


def test_test_lists_that_are_not_json_lists_are_refused() -> None:
    record = dict(by_id("swe_bench", "pallets__flask-5014"), FAIL_TO_PASS="tests/test_blueprints.py::x")
    with pytest.raises(RecordError, match="not a JSON list"):
        convert("swe_bench", record)


def test_swe_gym_builds_swebench_python_script_and_openhands_image_name() -> None:
    record = by_id("swe_gym", "getmoto__moto-5752")
    row = convert("swe_gym", record)
    assert row["image"] == "docker://xingyaoww/sweb.eval.x86_64.getmoto_s_moto-5752:latest"
    script = row["eval_script"]
    assert record["test_patch"].rstrip("\n") in script
    assert "pytest --no-header -rA --tb=no -p no:cacheprovider tests/test_ssm/test_ssm_boto3.py" in script
    assert script.index("git apply -v -") < script.index(START) < script.index(END)
    assert f"git checkout {record['base_commit']} tests/test_ssm/test_ssm_boto3.py" in script
    assert row["log_parser"] == "parse_log_pytest"
    with pytest.raises(RecordError, match="no FAIL_TO_PASS"):
        convert("swe_gym", by_id("swe_gym", "dask__dask-6818"))
    without = {k: v for k, v in record.items() if k != "FAIL_TO_PASS"}
    with pytest.raises(RecordError, match="no FAIL_TO_PASS"):
        convert("swe_gym", without)


def test_swe_rebench_runs_the_install_configs_test_command_in_its_image() -> None:
    record = by_id("swe_rebench", "oemof__tespy-653")
    row = convert("swe_rebench", record)
    assert f"{record['install_config']['test_cmd']} tests/test_tespy.py" in row["eval_script"]
    assert "\npip install -e .\n" in row["eval_script"]
    assert row["image"] == f"docker://{record['docker_image']}"
    # no docker_image: OpenHands' swerebench/ namespace in SWE-bench's naming
    row = convert("swe_rebench", by_id("swe_rebench", "biopython__biopython-5005"))
    assert row["image"] == "docker://swerebench/sweb.eval.x86_64.biopython_1776_biopython-5005:latest"
    with pytest.raises(RecordError, match="install_config"):
        convert("swe_rebench", by_id("swe_rebench", "kedro-org__kedro-3272"))


def test_swe_smith_keeps_the_bug_patch_apart_and_tests_the_fail_to_pass_files() -> None:
    record = by_id("swe_smith", "getmoto__moto.694ce1f4.func_basic__0ryg9zbs")
    row = convert("swe_smith", record)
    assert row["bug_patch"] == record["patch"] and row["patch"] == "" and row["test_patch"] == ""
    assert row["image"] == "docker://jyangballin/swesmith.x86_64.getmoto_1776_moto.694ce1f4"
    assert row["base_commit"] == record["base_commit"]
    assert "tests/test_ssm/test_ssm_boto3.py tests/test_ssm/test_ssm_utils.py" in row["eval_script"]
    with pytest.raises(RecordError, match="no FAIL_TO_PASS"):
        convert("swe_smith", by_id("swe_smith", "getmoto__moto.694ce1f4.func_pm_remove_cond__7yl5u3lq"))


def test_modified_files_are_the_diffs_targets() -> None:
    patch = (
        "diff --git a/a/x.py b/a/x.py\n+1\ndiff --git a/t/y.py b/t/y.py\n+2\ndiff --git a/a/x.py b/a/x.py\n"
    )
    assert modified_files(patch) == ["a/x.py", "t/y.py"]


# --- image resolution (SweConfig) ---------------------------------------------------------------

REF = "docker://swebench/sweb.eval.x86_64.django_1776_django-11099:latest"


@pytest.mark.parametrize(
    "sif_name",
    [
        "swebench_sweb.eval.x86_64.django_1776_django-11099.sif",
        "sweb.eval.x86_64.django_1776_django-11099_latest.sif",
    ],
)
def test_a_docker_reference_resolves_to_its_sif_in_sif_dir(tmp_path: Path, sif_name: str) -> None:
    (tmp_path / sif_name).write_bytes(b"SIF")
    row = convert("swe_bench_verified", by_id("swe_bench_verified", "django__django-11099"))
    assert row["image"] == REF
    for backend in ("apptainer", "bubblewrap"):
        config = SweConfig(backend=backend, sif_dir=tmp_path, cache_dir=tmp_path / "cache")
        assert config.resolve_image(row) == str(tmp_path / sif_name)


def test_a_docker_reference_without_a_sif_stays_a_reference_for_apptainer_only(tmp_path: Path) -> None:
    row = {"instance_id": "django__django-11099", "image": REF}
    assert SweConfig(backend="apptainer", sif_dir=tmp_path, cache_dir=tmp_path).resolve_image(row) == REF
    assert SweConfig(backend="apptainer", sif_dir=None, cache_dir=tmp_path).resolve_image(row) == REF
    assert SweConfig(backend="bubblewrap", sif_dir=tmp_path, cache_dir=tmp_path).resolve_image(row) is None
    # an image_template still wins, and a plain existing path is still used as it is
    templated = SweConfig(backend="apptainer", sif_dir=tmp_path, cache_dir=tmp_path,
                          image_template="{sif_dir}/{instance_id_docker}.sif")  # fmt: skip
    assert templated.resolve_image(row) == f"{tmp_path}/django_1776_django-11099.sif"
    (tmp_path / "x.sif").write_bytes(b"SIF")
    plain = {"instance_id": "a", "image": str(tmp_path / "x.sif")}
    assert SweConfig(backend="apptainer", cache_dir=tmp_path).resolve_image(plain) == str(tmp_path / "x.sif")


# --- grading: the row's tests through swebench's own report --------------------------------------


def marked_log(lines: list[str]) -> str:
    return "\n".join(["+ git apply -v -", f"+ : '{START}'", *lines, f"+ : '{END}'", ""])


def test_a_swebench_row_is_resolved_only_when_every_listed_test_passes() -> None:
    row = convert("swe_bench_verified", by_id("swe_bench_verified", "pallets__flask-5014"))
    tests = row["FAIL_TO_PASS"] + row["PASS_TO_PASS"]
    passing = marked_log([f"PASSED {t}" for t in tests])
    assert grade(row, passing, "diff --git a/x b/x\n")["resolved"] is True
    failing = marked_log([f"FAILED {row['FAIL_TO_PASS'][0]}"] + [f"PASSED {t}" for t in row["PASS_TO_PASS"]])
    assert grade(row, failing, "diff --git a/x b/x\n")["resolved"] is False
    broken = marked_log([f"PASSED {t}" for t in row["FAIL_TO_PASS"]] + [f"FAILED {row['PASS_TO_PASS'][0]}"])
    assert grade(row, broken, "diff --git a/x b/x\n")["resolved"] is False


def test_a_django_row_is_graded_with_its_own_log_parser() -> None:
    row = convert("swe_bench_verified", by_id("swe_bench_verified", "django__django-11099"))
    tests = row["FAIL_TO_PASS"] + row["PASS_TO_PASS"]
    assert grade(row, marked_log([f"{t} ... ok" for t in tests]), "diff --git a/x b/x\n")["resolved"] is True
    failing = [f"{row['FAIL_TO_PASS'][0]} ... FAIL"] + [f"{t} ... ok" for t in tests[1:]]
    assert grade(row, marked_log(failing), "diff --git a/x b/x\n")["resolved"] is False


def test_a_classic_schema_record_is_refused_naming_the_copy_to_use() -> None:
    classic = {
        k: v
        for k, v in by_id("swe_bench_verified", "django__django-11099").items()
        if k not in ("eval_script", "image", "log_parser", "eval_type")
    }
    with pytest.raises(RecordError, match=r"classic-schema.*--source SWE-bench/SWE-bench_Verified"):
        convert("swe_bench_verified", classic)


def test_the_installed_swebench_has_no_harness_specs_to_write_a_classic_records_eval_script() -> None:
    """Why a classic record is refused rather than completed: swebench 4 wrote an eval script from
    per-repo harness specs (`MAP_REPO_VERSION_TO_SPECS`); swebench 5, which the project requires,
    has none and reads the script from the record itself. Should a later swebench write them
    again, this fails, and the converter should build the script with it."""
    import swebench.harness.constants as constants
    from swebench.harness.utils import make_test_spec

    assert not hasattr(constants, "MAP_REPO_VERSION_TO_SPECS")
    record = by_id("swe_bench_verified", "django__django-11099")
    classic = {k: v for k, v in record.items() if k != "eval_script"}
    with pytest.raises(KeyError, match="eval_script"):
        make_test_spec(classic)
