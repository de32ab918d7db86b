# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""SWE EVAL: in a fresh sandbox, apply the model's patch (git apply, then `patch --fuzz`), run
the instance's SWE-bench eval script (it applies `test_patch` and runs the tests between the
SWE-bench output markers), and grade with the `swebench` package's own log parser and report
(`make_test_spec`, `get_eval_report`): FAIL_TO_PASS and PASS_TO_PASS into `resolved`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import shlex
import tempfile
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from nemo_gym_prorl.sandbox import Sandbox, SandboxError, aopen_sandbox
from nemo_gym_prorl.sandbox.threads import in_sandbox_thread
from nemo_gym_prorl.sandbox.workspace_fs import write_no_follow
from nemo_gym_prorl.tasks.base import EvalOutcome
from nemo_gym_prorl.tasks.swe.config import REPO_MOUNT, SweConfig
from nemo_gym_prorl.tasks.swe.materialize import ensure_repo

log = logging.getLogger(__name__)

# The harness's own sequence (swebench.harness.constants GIT_APPLY_CMDS), minus --reject, which
# leaves a half-applied tree behind; `patch --fuzz` tolerates shifted context.
APPLY_COMMANDS = (
    ("git_apply", "git apply --verbose --whitespace=nowarn {patch}"),
    ("patch_fuzz", "patch --batch --fuzz=5 -p1 -i {patch}"),
)
REQUIRED_FIELDS = ("instance_id", "FAIL_TO_PASS", "PASS_TO_PASS", "eval_script")


async def open_instance_sandbox(config: SweConfig, row: Mapping[str, Any]) -> Sandbox:
    """A fresh sandbox with the instance's repository at /testbed."""
    spec = config.sandbox_spec(row)
    source = config.repo_source(row)
    if source is not None:
        await asyncio.to_thread(ensure_repo, config, row)  # a generated instance's, on first use
    if source is not None and not (source / ".git").is_dir():
        log.warning("the repository of %s is missing at %s", row.get("instance_id"), source)
        raise SandboxError(
            f"the repository of {row.get('instance_id')} is not built on this server: run `prorl swe build` "
            "(offline instances) or set image_template/sif_dir (images)"
        )
    sandbox = await aopen_sandbox(spec)
    try:
        if source is not None:
            await in_sandbox_thread(sandbox.copy_into_workspace, source)
    except BaseException:
        await sandbox.aclose()
        raise
    return sandbox


def _tmp_file(sandbox: Sandbox, name: str, data: str) -> str:
    """Write into the sandbox's private /tmp (never through a link the policy left there);
    returns the path as seen inside."""
    write_no_follow(sandbox.tmp_dir, [name], data.encode())
    return f'"$TMPDIR"/{name}'


async def apply_patch(
    sandbox: Sandbox, patch: str, timeout: float
) -> tuple[str | None, list[dict[str, Any]]]:
    """Apply `patch` at /testbed; returns (method that worked or None, attempts)."""
    if not patch.endswith("\n"):
        patch += "\n"
    inside = _tmp_file(sandbox, "model.patch", patch)
    attempts = []
    for method, template in APPLY_COMMANDS:
        cmd = f"cd {REPO_MOUNT} && " + template.format(patch=inside)
        res = await sandbox.exec(["/bin/sh", "-c", cmd], timeout=timeout)
        attempts.append(
            {"method": method, "exit_code": res.exit_code, "output": (res.stdout + res.stderr)[-2000:]}
        )
        if res.ok:
            return method, attempts
        if method == "git_apply":
            continue
        # patch may have applied some hunks before failing: restore the tree before giving up
        await sandbox.exec(["/bin/sh", "-c", f"cd {REPO_MOUNT} && git checkout -q -- . && git clean -fdq"])
    return None, attempts


async def run_eval_script(
    sandbox: Sandbox, script: str, timeout: float, max_bytes: int
) -> tuple[str, bool, float]:
    inside = _tmp_file(sandbox, "eval.sh", script)
    started = time.perf_counter()
    res = await sandbox.exec(
        ["/bin/bash", "-c", f"bash {inside} 2>&1"], timeout=timeout, max_output_bytes=max_bytes
    )
    return res.stdout + res.stderr, res.timed_out, time.perf_counter() - started


def test_statuses(log: str, log_parser: str = "parse_log_pytest") -> dict[str, str] | None:
    """Each test's status in an eval log, read by swebench's own parser from the part between the
    harness's output markers; None when the tests did not run (no start marker)."""
    from swebench.harness.constants import END_TEST_OUTPUT, START_TEST_OUTPUT
    from swebench.harness.log_parsers import PARSER_REGISTRY

    if START_TEST_OUTPUT not in log:
        return None
    sliced = log.split(START_TEST_OUTPUT, 1)[1].split(END_TEST_OUTPUT, 1)[0]
    return PARSER_REGISTRY[log_parser](sliced, None)


def grade(row: Mapping[str, Any], log: str, patch: str) -> dict[str, Any]:
    """SWE-bench's own grading of an eval log."""
    from swebench.harness.grading import get_eval_report
    from swebench.harness.utils import make_test_spec

    instance = {
        "image": "",
        "repo": "",
        "version": "",
        "log_parser": "parse_log_pytest",
        "eval_type": "pass_and_fail",
        **{k: row[k] for k in row if isinstance(k, str)},
    }
    for key in ("FAIL_TO_PASS", "PASS_TO_PASS"):
        if isinstance(instance[key], str):
            instance[key] = json.loads(instance[key])
    spec = make_test_spec(instance)
    with tempfile.NamedTemporaryFile("w", suffix=".log", delete=False) as f:
        f.write(log)
        log_path = f.name
    try:
        report = get_eval_report(
            spec, {"instance_id": spec.instance_id, "model_patch": patch}, log_path, True
        )
    finally:
        Path(log_path).unlink(missing_ok=True)
    return report[spec.instance_id]


def _rates(tests_status: Mapping[str, Any]) -> dict[str, float]:
    out = {}
    for key in ("FAIL_TO_PASS", "PASS_TO_PASS"):
        block = tests_status.get(key) or {}
        ok, bad = len(block.get("success", [])), len(block.get("failure", []))
        out[key] = ok / (ok + bad) if ok + bad else 1.0
    return out


async def evaluate_patch(config: SweConfig, row: Mapping[str, Any], patch: str | None) -> EvalOutcome:
    missing = [k for k in REQUIRED_FIELDS if k not in row]
    if missing:
        return EvalOutcome.zero("bad_row", f"instance lacks {missing}")
    if not isinstance(patch, str) or not patch.strip():
        return EvalOutcome.from_components({"resolved": 0.0}, reason="empty_patch", resolved=False,
                                           report={"patch_exists": False})  # fmt: skip
    timing: dict[str, float] = {}
    started = time.perf_counter()
    try:
        sandbox = await open_instance_sandbox(config, row)
    except Exception as exc:
        return EvalOutcome.infra_failure(f"could not prepare the eval sandbox: {exc}")
    timing["sandbox_s"] = time.perf_counter() - started
    try:
        t = time.perf_counter()
        method, attempts = await apply_patch(sandbox, patch, config.apply_timeout_s)
        timing["apply_s"] = time.perf_counter() - t
        if method is None:
            return EvalOutcome.from_components(
                {"resolved": 0.0}, reason="patch_apply_failed", resolved=False,
                report={"patch_exists": True, "apply_attempts": attempts, "timing": timing},
            )  # fmt: skip
        log, timed_out, timing["tests_s"] = await run_eval_script(
            sandbox, str(row["eval_script"]), config.eval_timeout_s, config.max_log_bytes
        )
    except Exception as exc:
        return EvalOutcome.infra_failure(f"eval sandbox failed: {type(exc).__name__}: {exc}")
    finally:
        await sandbox.aclose()
    try:
        result = await asyncio.to_thread(grade, row, log, patch)
    except Exception as exc:
        return EvalOutcome.infra_failure(f"grading failed: {type(exc).__name__}: {exc}")
    timing["total_s"] = time.perf_counter() - started
    resolved = bool(result.get("resolved"))
    status = result.get("tests_status") or {}
    report = {
        "patch_exists": True,
        "applied_with": method,
        "patch_successfully_applied": bool(result.get("patch_successfully_applied")),
        "tests_status": status,
        "pass_rates": _rates(status),
        "timing": timing,
        "log_tail": log[-3000:],
    }
    if timed_out:
        return EvalOutcome.from_components(
            {"resolved": 0.0}, reason="tests_timeout", resolved=False, report=report
        )
    if result.get("infra_failure"):
        return EvalOutcome.infra_failure(str(result.get("infra_failure_reason")), report=report)
    if not result.get("patch_successfully_applied"):
        # no parseable test output: the patch broke collection (syntax error, import error) or the tests
        return EvalOutcome.from_components({"resolved": 0.0}, reason="tests_did_not_run", resolved=False,
                                           report=report)  # fmt: skip
    return EvalOutcome.from_components(
        {"resolved": float(resolved)},
        reason="resolved" if resolved else "unresolved",
        resolved=resolved,
        report=report,
    )


async def extract_patch(
    sandbox: Sandbox, base_commit: str, timeout: float = 120.0, exclude: Iterable[str] = ()
) -> tuple[str, str | None]:
    """The RUN's result: every change under /testbed against `base_commit` (new files included,
    binary files as git binary diffs), but for `exclude` (paths relative to /testbed that the
    image itself adds, such as R2E-Gym's run_tests.sh). Returns (patch, error)."""
    excluded = " ".join(shlex.quote(f":(exclude){path}") for path in exclude)
    cmd = (
        f"cd {REPO_MOUNT} && git add -A >/dev/null 2>&1; "
        f"git diff --cached --no-color --no-ext-diff --binary {shlex.quote(base_commit)} -- . "
        f"':(exclude)**/__pycache__/**' ':(exclude)*.pyc' {excluded}"
    )
    res = await sandbox.exec(["/bin/sh", "-c", cmd], timeout=timeout, max_output_bytes=16 * 1024 * 1024)
    if not res.ok:
        return "", f"git diff failed ({res.exit_code}): {res.stderr[-500:]}"
    if res.truncated:
        return "", "patch larger than 16 MiB"
    return res.stdout, None
