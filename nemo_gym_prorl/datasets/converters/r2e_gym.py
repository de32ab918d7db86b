# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""R2E-Gym -> full `prorl_swe` rows, run in R2E-Gym's own images and graded the SWE-bench way.

The schema is R2E-Gym's `DatasetRow` (github.com/R2E-Gym/R2E-Gym @69bc953,
`src/r2egym/repo_analysis/validate_docker_and_hf.py`): `repo_name`, `docker_image`,
`commit_hash`, `problem_statement`, and three strings that hold JSON: `parsed_commit_content`
(a `ParsedCommit`, `commit_models/diff_classes.py`), `execution_result_content` (an
`ExecutionResult`: the hidden tests' runs before and after the commit) and
`expected_output_json` (test -> status after the commit). What this module reads from them:

  - image: `docker_image` (`namanjain12/<repo>_final:<commit>`, whose Dockerfile checks out the
    commit's parent at /testbed, puts the hidden tests in /r2e_tests and the test command in
    /testbed/run_tests.sh);
  - base_commit: `old_commit_hash`, which R2E-Gym records as `<commit>^` (git resolves it);
  - patch (the gold fix): `ParsedCommit.get_patch(test_file=False)`, the diffs of the non-test
    Python files rebuilt from the parsed hunks exactly as R2E-Gym rebuilds them;
  - FAIL_TO_PASS / PASS_TO_PASS: the hidden tests' own runs, read by swebench's pytest parser
    (ids keep their file): passed after the commit and not before / passed both times. R2E-Gym's
    own reward also wants every test that failed after the commit to fail again; SWE-bench's
    resolution, used here as for every SWE dataset, does not look at those;
  - eval_script: the image's run_tests.sh on its /r2e_tests between SWE-bench's output markers;
  - hidden_dirs: the agent's sandbox shows /r2e_tests (and /testbed/r2e_tests, where older
    images kept them) empty; R2E-Gym itself only moves them under /root and links them back;
  - patch_exclude: what the image adds to /testbed and the agent's patch must never carry.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from nemo_gym_prorl.datasets.catalog import DatasetEnvironment, RecordError, Tools
from nemo_gym_prorl.datasets.converters.math import text_field
from nemo_gym_prorl.datasets.converters.swe import (
    APPTAINER,
    END,
    REPO_DIR,
    START,
    apptainer_reference,
    instance_row,
    json_field,
)

HIDDEN_TESTS = "/r2e_tests"
# R2E-Gym's SKIP_FILES_NEW (agenthub/__init__.py): added to /testbed by the image, not by the fix
IMAGE_FILES = ("run_tests.sh", "r2e_tests")


def _is_test_file(path: str) -> bool:
    """`FileDiff.is_test_file` (diff_classes.py)."""
    parts = path.split("/")
    return (
        path.endswith("_test.py")
        or path.startswith("test_")
        or parts[-1].startswith("test_")
        or any(p in parts for p in ("tests", "Tests", "test", "Test"))
    )


def _range(r: Mapping[str, Any]) -> str:
    return f"{r['start']}" if r.get("length") is None else f"{r['start']},{r['length']}"


LINE_PREFIX = {"context": " ", "added": "+", "deleted": "-", "note": "\\ "}


def _path(diff: Mapping[str, Any]) -> str:
    return diff["header"]["file"]["path"]


def _file_patch(diff: Mapping[str, Any]) -> str:
    """`FileDiff.get_patch`: header, index line, ---/+++ and the hunks, as R2E-Gym writes them."""
    path = _path(diff)
    patch = f"diff --git a/{path} b/{path}\n"
    if diff["header"].get("misc_line"):
        patch += diff["header"]["misc_line"] + "\n"
    if index := diff.get("index_line"):
        mode = index.get("mode") or ""
        patch += f"index {index['old_commit_hash']}..{index['new_commit_hash']}{' ' if mode else ''}{mode}\n"
    if diff.get("is_binary_file"):
        patch += f"{diff.get('binary_line') or ''}\n"
    if diff.get("minus_file") and diff.get("plus_file"):
        patch += f"--- {diff['minus_file']['path']}\n+++ {diff['plus_file']['path']}\n"
    for hunk in diff.get("hunks") or []:
        d = hunk["descriptor"]
        patch += f"@@ -{_range(d['old_range'])} +{_range(d['new_range'])} @@"
        patch += f" {d['section']}\n" if d.get("section") else "\n"
        for line in hunk["line_group"]["all_lines"]:
            patch += f"{LINE_PREFIX[line['type']]}{line['content']}\n"
    return patch


def gold_patch(parsed_commit: Mapping[str, Any]) -> str:
    """`ParsedCommit.get_patch(test_file=False)`: the non-test Python files' diffs."""
    try:
        return "".join(
            _file_patch(diff)
            for diff in parsed_commit.get("file_diffs") or []
            if _path(diff).endswith(".py") and not _is_test_file(_path(diff))
        )
    except (KeyError, TypeError) as exc:
        raise RecordError(f"parsed_commit_content is not a ParsedCommit: missing {exc}") from exc


def tests_from_runs(execution: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """(FAIL_TO_PASS, PASS_TO_PASS) from the hidden tests' runs before and after the commit."""
    from swebench.harness.log_parsers import parse_log_pytest

    after = parse_log_pytest(str(execution.get("new_commit_res_stdout") or ""), None)
    before = parse_log_pytest(str(execution.get("old_commit_res_stdout") or ""), None)
    passed = [t for t, status in after.items() if status == "PASSED"]
    fail_to_pass = [t for t in passed if before.get(t) != "PASSED"]
    if not fail_to_pass:
        raise RecordError(
            "no FAIL_TO_PASS tests (no hidden test passes after the commit and fails before it)"
        )
    return fail_to_pass, [t for t in passed if before.get(t) == "PASSED"]


def issue_text(record: Mapping[str, Any]) -> str:
    """The issue, from between [ISSUE] and [/ISSUE] where R2E-Gym's text has them
    (`DockerRuntime.get_task_instruction`)."""
    text = text_field(record, "problem_statement")
    found = re.search(r"\[ISSUE\](.*)\[/ISSUE\]", text, flags=re.DOTALL)
    return found.group(1).strip() if found else text


def eval_script() -> str:
    """The image's test command on its hidden tests, at /testbed, between SWE-bench's markers."""
    return "\n".join([
        "#!/bin/bash", "set -uxo pipefail", f"cd {REPO_DIR}",
        f"if [ -d {HIDDEN_TESTS} ]; then rm -rf r2e_tests && cp -a {HIDDEN_TESTS} r2e_tests; fi",
        f": '{START}'", "bash run_tests.sh", f": '{END}'",
    ]) + "\n"  # fmt: skip


def r2e_gym(record: Mapping[str, Any], tools: Tools, agent: str) -> dict[str, Any]:
    repo, commit = text_field(record, "repo_name"), text_field(record, "commit_hash")
    parsed = json_field(record, "parsed_commit_content")
    fail_to_pass, pass_to_pass = tests_from_runs(json_field(record, "execution_result_content"))
    patch = gold_patch(parsed)
    if not patch:
        raise RecordError("the commit changes no non-test Python file (no gold patch)")
    base = parsed.get("old_commit_hash")
    if not isinstance(base, str) or not base.strip():
        raise RecordError("parsed_commit_content has no old_commit_hash")
    instance = {
        "instance_id": f"{repo}__{commit}", "repo": repo, "base_commit": base,
        "problem_statement": issue_text(record), "patch": patch,
    }  # fmt: skip
    return instance_row(instance, tools, agent, "r2e-gym", FAIL_TO_PASS=fail_to_pass, PASS_TO_PASS=pass_to_pass,
                        eval_script=eval_script(), image=apptainer_reference(text_field(record, "docker_image")),
                        hidden_dirs=[HIDDEN_TESTS, f"{REPO_DIR}/r2e_tests"], patch_exclude=list(IMAGE_FILES))  # fmt: skip


ENVIRONMENTS: tuple[DatasetEnvironment, ...] = (
    DatasetEnvironment(
        name="r2e_gym",
        title="R2E-Gym",
        domain="swe",
        hub_id="R2E-Gym/R2E-Gym-Subset",
        train_splits=("train",),
        published_rows="see the dataset card (R2E-Gym-Subset; also R2E-Gym-Lite and R2E-Gym-V1, same schema)",
        license="not stated on the dataset card (R2E-Gym's code is Apache-2.0); each repository keeps its own",
        gym_license="TBD",
        schema_source="github.com/R2E-Gym/R2E-Gym @69bc953: repo_analysis/validate_docker_and_hf.py DatasetRow, "
        "commit_models/diff_classes.py ParsedCommit.get_patch, repo_analysis/execution_result_analysis.py "
        "ExecutionResult, agenthub/runtime/docker.py (setup_env, run_tests, _calculate_reward_r2e)",
        needs=f"{APPTAINER} (namanjain12/<repo>_final:<commit>); the agent's sandbox shows /r2e_tests empty",
        max_turns=50,
        convert=r2e_gym,
    ),
)
