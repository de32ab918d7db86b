# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""SWE datasets -> full `prorl_swe` rows (`datasets.swe.swe_rows`), graded by `tasks/swe`.

A row carries what the grader reads: `eval_script` (run at /testbed in the instance's image; it
applies the hidden tests and prints SWE-bench's output markers), `FAIL_TO_PASS` / `PASS_TO_PASS`
(lists), `log_parser` and `eval_type` (swebench's report), `base_commit` and `image`: the
Apptainer reference of the dataset's own image (`docker://...`), which `SweConfig.resolve_image`
maps to a SIF in `sif_dir` when one is there. Only `responses_create_params` reaches the policy;
the gold patch, test patch and test lists stay server-side, as in `prorl data prepare --domain swe`.

Where the eval script comes from:
  - SWE-bench (swebench >= 5): the published record carries `eval_script`, `image`, `log_parser`
    and `eval_type` (the harness's `make_test_spec` reads them as they are); the installed
    swebench has no per-repo specs any more, so a record without `eval_script` (the 2024
    princeton-nlp copies) is refused rather than graded by a guessed command.
  - SWE-rebench: its `install_config` is the SWE-bench spec of the instance (`test_cmd`,
    `eval_commands`, `install`); the script is built in SWE-bench's Python layout, as the
    SWE-rebench fork of the harness does.
  - SWE-Gym: same layout with SWE-bench's generic pytest command (SWE-Gym's own harness fork keeps
    per-repo commands this package does not have).
  - SWE-smith: the tests are in the repository (no test patch); the script runs SWE-smith's
    default pytest command on the FAIL_TO_PASS files, as `swesmith.harness.utils` does.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterable, Mapping
from typing import Any

from nemo_gym_prorl.datasets.catalog import DatasetEnvironment, RecordError, Tools
from nemo_gym_prorl.datasets.converters.math import text_field
from nemo_gym_prorl.datasets.swe import swe_rows

REPO_DIR = "/testbed"
CONDA_ENV = "testbed"  # the conda environment SWE-bench-built images install into
HEREDOC = "EOF_114329324912"  # the delimiter SWE-bench's own eval scripts use
START, END = ">>>>> Start Test Output", ">>>>> End Test Output"
# swebench 4.x harness/constants/python.py TEST_PYTEST (the generic pytest repos' command)
SWEBENCH_PYTEST = "pytest --no-header -rA --tb=no -p no:cacheprovider"
# SWE-smith constants.TEST_PYTEST; -rA added so swebench's parse_log_pytest sees every status
SWESMITH_PYTEST = "pytest --disable-warnings --color=no --tb=no --verbose -rA"
# swebench NON_TEST_EXTS: files a test patch touches that are not test targets
NON_TEST_EXTS = (".json", ".png", "csv", ".txt", ".md", ".jpg", ".jpeg", ".pkl", ".yml", ".yaml", ".toml")


def test_list(record: Mapping[str, Any], key: str) -> list[str]:
    """FAIL_TO_PASS / PASS_TO_PASS: a JSON-encoded string (SWE-bench's 2024 parquet) or a list."""
    value = record.get(key)
    if value is None or value == "":
        return []
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise RecordError(f"{key} is not a JSON list: {exc}") from exc
    if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
        raise RecordError(f"{key} is not a list of test ids")
    return list(value)


def graded_tests(record: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """(FAIL_TO_PASS, PASS_TO_PASS); an empty FAIL_TO_PASS would grade every patch as resolved."""
    fail_to_pass = test_list(record, "FAIL_TO_PASS")
    if not fail_to_pass:
        raise RecordError("no FAIL_TO_PASS tests")
    return fail_to_pass, test_list(record, "PASS_TO_PASS")


def apptainer_reference(image: str) -> str:
    """An image name as Apptainer pulls it (`docker://` unless it already names a transport)."""
    return image if "://" in image else f"docker://{image}"


def swebench_image(instance_id: str) -> str:
    """SWE-bench's per-instance image (`swebench.task.checks.expected_image`: lower-cased,
    `__` -> `_1776_`, e.g. swebench/sweb.eval.x86_64.django_1776_django-11099:latest)."""
    from swebench.task.checks import expected_image

    return expected_image(instance_id)


def swegym_image(instance_id: str) -> str:
    """SWE-Gym's image (OpenHands `get_instance_docker_image`, non-official branch: prefix
    xingyaoww/, `__` -> `_s_`, lower-cased; no tag, so Docker's `latest`)."""
    return f"xingyaoww/sweb.eval.x86_64.{instance_id.replace('__', '_s_')}:latest".lower()


def swerebench_image(instance_id: str) -> str:
    """SWE-rebench's published images (OpenHands: namespace swerebench/, SWE-bench's naming)."""
    return swebench_image(instance_id).replace("swebench/", "swerebench/", 1)


def modified_files(patch: str) -> list[str]:
    """Files a diff touches (swebench `get_modified_files` / `get_test_directives`' pattern)."""
    return list(dict.fromkeys(re.findall(r"^diff --git a/.* b/(.*)$", patch, flags=re.MULTILINE)))


def python_eval_script(base_commit: str, test_patch: str, test_cmd: str, directives: Iterable[str],
                       eval_commands: Iterable[str] = (), install: str | None = None) -> str:  # fmt: skip
    """SWE-bench's Python eval script (`make_eval_script_list_py`): reset the test files, apply
    `test_patch`, run `test_cmd` on the directives between the output markers, reset again."""
    test_files = " ".join(shlex.quote(f) for f in modified_files(test_patch))
    reset = f"git checkout {base_commit} {test_files}"
    lines = ["#!/bin/bash", "set -uxo pipefail", "source /opt/miniconda3/bin/activate",
             f"conda activate {CONDA_ENV}", f"cd {REPO_DIR}", *eval_commands,
             f"git config --global --add safe.directory {REPO_DIR}", f"cd {REPO_DIR}", "git status",
             f"git -c core.fileMode=false diff {base_commit}", "source /opt/miniconda3/bin/activate",
             f"conda activate {CONDA_ENV}", *([install] if install else []), reset,
             f"git apply -v - <<'{HEREDOC}'\n{test_patch.rstrip(chr(10))}\n{HEREDOC}",
             f": '{START}'", " ".join([test_cmd, *directives]), f": '{END}'", reset]  # fmt: skip
    return "\n".join(lines) + "\n"


def test_directives(test_patch: str) -> list[str]:
    return [f for f in modified_files(test_patch) if not f.endswith(NON_TEST_EXTS)]


def instance_row(record: Mapping[str, Any], tools: Tools, agent: str, source: str,
                 **fields: Any) -> dict[str, Any]:  # fmt: skip
    """The full row: the record's SWE-bench fields plus what the grader needs (`fields`)."""
    instance: dict[str, Any] = {
        "instance_id": text_field(record, "instance_id"),
        "repo": text_field(record, "repo"),
        "version": str(record.get("version") or ""),
        "base_commit": text_field(record, "base_commit"),
        "problem_statement": text_field(record, "problem_statement"),
        "patch": str(record.get("patch") or ""),
        "test_patch": str(record.get("test_patch") or ""),
        "log_parser": "parse_log_pytest",
        "eval_type": "pass_and_fail",
        "source": source,
        **fields,
    }
    (row,) = swe_rows([instance], agent=agent, tools=tools or None)
    return row


def swebench(record: Mapping[str, Any], tools: Tools, agent: str) -> dict[str, Any]:
    """SWE-bench / Lite / Verified as swebench 5 publishes them (the record's own eval script)."""
    fail_to_pass, pass_to_pass = graded_tests(record)
    script = record.get("eval_script")
    if not isinstance(script, str) or START not in script:
        raise RecordError(
            "no eval_script with SWE-bench's output markers: a classic-schema record (the princeton-nlp/* "
            "copies, from before swebench 5) leaves its test command to per-repo harness specs the installed "
            "swebench no longer has; use the copy SWE-bench publishes today, which carries its eval_script "
            "(--source SWE-bench/SWE-bench_Verified, SWE-bench/SWE-bench_Lite or SWE-bench/SWE-bench)"
        )
    iid = text_field(record, "instance_id")
    return instance_row(record, tools, agent, "swe-bench", FAIL_TO_PASS=fail_to_pass, PASS_TO_PASS=pass_to_pass,
                        eval_script=script, log_parser=text_field(record, "log_parser"),
                        eval_type=str(record.get("eval_type") or "pass_and_fail"),
                        image=apptainer_reference(str(record.get("image") or swebench_image(iid))))  # fmt: skip


def swe_gym(record: Mapping[str, Any], tools: Tools, agent: str) -> dict[str, Any]:
    fail_to_pass, pass_to_pass = graded_tests(record)
    test_patch = text_field(record, "test_patch")
    script = python_eval_script(text_field(record, "base_commit"), test_patch, SWEBENCH_PYTEST,
                                test_directives(test_patch))  # fmt: skip
    iid = text_field(record, "instance_id")
    return instance_row(record, tools, agent, "swe-gym", FAIL_TO_PASS=fail_to_pass, PASS_TO_PASS=pass_to_pass,
                        eval_script=script, image=apptainer_reference(swegym_image(iid)))  # fmt: skip


def json_field(record: Mapping[str, Any], key: str) -> dict[str, Any]:
    """A mapping field that datasets publish as a JSON string (or a loader flattened into one),
    or that a loader already decoded."""
    value = record.get(key)
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else None
        except json.JSONDecodeError as exc:
            raise RecordError(f"{key} is not JSON: {exc}") from exc
    if not isinstance(value, Mapping):
        raise RecordError(f"no {key}")
    return dict(value)


def install_config(record: Mapping[str, Any]) -> dict[str, Any]:
    config = json_field(record, "install_config")
    if not config.get("test_cmd"):
        raise RecordError("no install_config.test_cmd")
    return config


def swe_rebench(record: Mapping[str, Any], tools: Tools, agent: str) -> dict[str, Any]:
    fail_to_pass, pass_to_pass = graded_tests(record)
    config = install_config(record)
    test_cmd = config["test_cmd"]
    test_cmd = " ".join(test_cmd) if isinstance(test_cmd, list) else str(test_cmd)
    test_patch = text_field(record, "test_patch")
    script = python_eval_script(text_field(record, "base_commit"), test_patch, test_cmd, test_directives(test_patch),
                                config.get("eval_commands") or (), config.get("install") or None)  # fmt: skip
    iid = text_field(record, "instance_id")
    image = str(record.get("docker_image") or swerebench_image(iid))
    return instance_row(record, tools, agent, "swe-rebench", FAIL_TO_PASS=fail_to_pass, PASS_TO_PASS=pass_to_pass,
                        eval_script=script, image=apptainer_reference(image))  # fmt: skip


def swesmith_eval_script(fail_to_pass: list[str]) -> str:
    """`swesmith.harness.utils.run_patch_in_container`'s script for a pytest repo: the default
    command on the files of the FAIL_TO_PASS tests (the tests are already in the repository)."""
    files = " ".join(shlex.quote(f) for f in dict.fromkeys(t.split("::", 1)[0] for t in fail_to_pass))
    return "\n".join(["#!/bin/bash", "set -uxo pipefail", "source /opt/miniconda3/bin/activate",
                      f"conda activate {CONDA_ENV}", f"cd {REPO_DIR}", f": '{START}'",
                      f"{SWESMITH_PYTEST} {files}", f": '{END}'"]) + "\n"  # fmt: skip


def swe_smith(record: Mapping[str, Any], tools: Tools, agent: str) -> dict[str, Any]:
    """SWE-smith: `patch` is the BUG (applied to the clean repository to make the task; the fix
    is its reverse), `base_commit` the bug commit on the swesmith/<repo> mirror's <instance_id>
    branch, `image_name` the clean repository's image. The bug diff is kept as `bug_patch`, never
    as `patch`, which this project's rows reserve for a gold fix."""
    fail_to_pass, pass_to_pass = graded_tests(record)
    image = text_field(record, "image_name")
    text_field(record, "patch")  # present and not blank; kept byte for byte (a diff's last newline matters)
    return instance_row(
        {**record, "patch": "", "test_patch": ""}, tools, agent, "swe-smith",
        FAIL_TO_PASS=fail_to_pass, PASS_TO_PASS=pass_to_pass, bug_patch=str(record["patch"]),
        eval_script=swesmith_eval_script(fail_to_pass), image=apptainer_reference(image),
    )  # fmt: skip


APPTAINER = "Apptainer (SweConfig backend=apptainer) and the dataset's images converted to SIF in `sif_dir`"

ENVIRONMENTS: tuple[DatasetEnvironment, ...] = (
    DatasetEnvironment(
        name="swe_bench_verified",
        title="SWE-bench Verified",
        domain="swe",
        hub_id="SWE-bench/SWE-bench_Verified",
        train_splits=("test",),
        published_rows="500 test",
        license="MIT (dataset card); each instance's repository keeps its own licence",
        gym_license="MIT",
        schema_source="swebench 5.0.2 (github.com/SWE-bench/SWE-bench @7a21e05, v5.0.0 changelog: 'Datasets "
        "carry their own eval_script and metadata'; harness/utils.py make_test_spec reads instance_id, image, "
        "repo, version, FAIL_TO_PASS, PASS_TO_PASS, log_parser, eval_type, eval_script; task/checks.py "
        "expected_image); base fields as in princeton-nlp/SWE-bench_Verified @6735859",
        needs=f"{APPTAINER} (swebench/sweb.eval.x86_64.*)",
        max_turns=50,
        convert=swebench,
    ),
    DatasetEnvironment(
        name="swe_bench_lite",
        title="SWE-bench Lite",
        domain="swe",
        hub_id="SWE-bench/SWE-bench_Lite",
        train_splits=("test",),
        published_rows="300 test, 23 dev",
        license="MIT (dataset card); each instance's repository keeps its own licence",
        gym_license="MIT",
        schema_source="swebench 5.0.2 (github.com/SWE-bench/SWE-bench @7a21e05: harness/utils.py make_test_spec, "
        "task/checks.py expected_image); base fields as in princeton-nlp/SWE-bench_Lite",
        needs=f"{APPTAINER} (swebench/sweb.eval.x86_64.*)",
        max_turns=50,
        convert=swebench,
    ),
    DatasetEnvironment(
        name="swe_bench",
        title="SWE-bench",
        domain="swe",
        hub_id="SWE-bench/SWE-bench",
        train_splits=("test",),
        published_rows="2,294 test (the 19,008-record train split of princeton-nlp/SWE-bench has no images or "
        "eval scripts)",
        license="MIT (dataset card); each instance's repository keeps its own licence",
        gym_license="MIT",
        schema_source="swebench 5.0.2 (github.com/SWE-bench/SWE-bench @7a21e05: harness/utils.py make_test_spec, "
        "task/checks.py expected_image); base fields as in princeton-nlp/SWE-bench @1194adf",
        needs=f"{APPTAINER} (swebench/sweb.eval.x86_64.*)",
        max_turns=50,
        convert=swebench,
    ),
    DatasetEnvironment(
        name="swe_gym",
        title="SWE-Gym",
        domain="swe",
        hub_id="SWE-Gym/SWE-Gym",
        train_splits=("train",),
        published_rows="2,438 train",
        license="MIT (dataset card); each instance's repository keeps its own licence",
        gym_license="MIT",
        schema_source="SWE-bench instance schema with list-valued FAIL_TO_PASS / PASS_TO_PASS; images from "
        "OpenHands evaluation/benchmarks/swe_bench/run_infer.py get_instance_docker_image "
        "(github.com/All-Hands-AI/OpenHands @156d068)",
        needs=f"{APPTAINER} (xingyaoww/sweb.eval.x86_64.*); tests run with SWE-bench's generic pytest "
        "command, not SWE-Gym's per-repo harness fork",
        max_turns=50,
        convert=swe_gym,
    ),
    DatasetEnvironment(
        name="swe_rebench",
        title="SWE-rebench",
        domain="swe",
        hub_id="nebius/SWE-rebench",
        train_splits=("filtered",),
        published_rows="see the dataset card (splits test and filtered)",
        license="CC-BY-4.0 (dataset card); each instance's repository keeps its own licence",
        gym_license="Creative Commons Attribution 4.0 International",
        schema_source="SWE-bench instance schema + install_config (the instance's SWE-bench spec) + docker_image: "
        "github.com/SWE-rebench/SWE-bench-fork @39316f7 harness/test_spec (test_spec.py, python.py "
        "make_eval_script_list_py); image namespace swerebench/ from OpenHands run_infer.py @156d068",
        needs=f"{APPTAINER} (swerebench/sweb.eval.x86_64.*)",
        max_turns=50,
        convert=swe_rebench,
    ),
    DatasetEnvironment(
        name="swe_smith",
        title="SWE-smith",
        domain="swe",
        hub_id="SWE-bench/SWE-smith",
        train_splits=("train",),
        published_rows="see the dataset card (train)",
        license="MIT (dataset card); each instance's repository keeps its own licence",
        gym_license="MIT",
        schema_source="github.com/SWE-bench/SWE-smith @cf2e649: swesmith/harness/gather.py (instance_id, repo, "
        "patch = bug patch, FAIL_TO_PASS, PASS_TO_PASS, created_at, image_name, base_commit = bug commit), "
        "harness/utils.py (eval: checkout base_commit, run the test command on the FAIL_TO_PASS files)",
        needs=f"{APPTAINER}, one SIF per instance whose /testbed is at the bug commit with no history back to "
        "the clean commit (the published image holds the clean repository)",
        max_turns=50,
        convert=swe_smith,
    ),
)
