# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Run a project's tests in a fresh sandbox, on its upstream tree with some files replaced: the
generator's baseline (with the call probe) and mutant runs.

The command line is the instances' own (`render_eval_script`: same pytest options, `--rootdir`,
PYTHONPATH, working directory), so the test ids and statuses read here are the ones EVAL reads,
by the same swebench parser. Only the probe plugin is added, from the sandbox's private /tmp."""

from __future__ import annotations

import asyncio
import json
import shlex
import time
from pathlib import Path

from pydantic import BaseModel, Field

from nemo_gym_prorl.sandbox import aopen_sandbox
from nemo_gym_prorl.sandbox.workspace_fs import read_no_follow, write_no_follow
from nemo_gym_prorl.tasks.swe.build import pythonpath_inside
from nemo_gym_prorl.tasks.swe.config import REPO_MOUNT, SweConfig
from nemo_gym_prorl.tasks.swe.evaluate import run_eval_script, test_statuses
from nemo_gym_prorl.tasks.swe.materialize import write_source
from nemo_gym_prorl.tasks.swe.projects import Project, copy_upstream

PROBE_SOURCE = Path(__file__).with_name("pytest_probe.py")
PROBE_MODULE = "_prorl_probe"
PYTEST_ARGS = f"--rootdir={REPO_MOUNT}"  # test ids must not depend on which files run
PASSED = frozenset({"PASSED", "XFAIL"})


class RunResult(BaseModel):
    statuses: dict[str, str] | None = Field(description="None when pytest did not get to run tests.")
    calls: dict[str, list[str]] = Field(default_factory=dict)
    failures: dict[str, str] = Field(default_factory=dict)
    timed_out: bool = False
    seconds: float = 0.0
    log_tail: str = ""


def _script(project: Project, files: list[str], trace: bool) -> str:
    roots = ":".join(f"{REPO_MOUNT}/{s}" for s in project.source)
    quoted = " ".join(shlex.quote(f) for f in files)
    return "\n".join([
        "#!/bin/bash",
        f"cd {REPO_MOUNT}",
        "export PYTHONDONTWRITEBYTECODE=1",
        f'export PYTHONPATH={pythonpath_inside(project.pythonpath)}:"$TMPDIR"',
        f'export PRORL_PROBE_OUT="$TMPDIR/probe.json" PRORL_PROBE_ROOTS={shlex.quote(roots)} '
        f"PRORL_PROBE_TRACE={int(trace)}",
        "echo '>>>>> Start Test Output'",
        f"python -m pytest -rA -p no:cacheprovider -o addopts='' {PYTEST_ARGS} -p {PROBE_MODULE} {quoted}",
        "echo '>>>>> End Test Output'",
    ]) + "\n"  # fmt: skip


async def run_project_tests(
    config: SweConfig,
    project: Project,
    tree: Path,
    files: list[str],
    *,
    replace: dict[str, str] | None = None,
    trace: bool = False,
    timeout: float = 600.0,
) -> RunResult:
    """Run `files` of the project's tests on a copy of `tree` with `replace` (path -> text) applied."""
    started = time.perf_counter()
    sandbox = await aopen_sandbox(config.sandbox_spec({}))
    try:

        def prepare() -> None:
            copy_upstream(tree, sandbox.workspace)
            for rel, text in (replace or {}).items():
                write_source(sandbox.workspace / rel, text)
            write_no_follow(sandbox.tmp_dir, [f"{PROBE_MODULE}.py"], PROBE_SOURCE.read_bytes())
            sandbox.hand_over(sandbox.workspace)

        await asyncio.to_thread(prepare)
        log, timed_out, _ = await run_eval_script(sandbox, _script(project, files, trace), timeout,
                                                  config.max_log_bytes)  # fmt: skip
        try:
            probe = json.loads(await asyncio.to_thread(read_no_follow, sandbox.tmp_dir, ["probe.json"]))
        except (OSError, ValueError):
            probe = {}
    finally:
        await sandbox.aclose()
    return RunResult(
        statuses=None if timed_out else test_statuses(log),
        calls={k: [c.removeprefix(f"{REPO_MOUNT}/") for c in v] for k, v in probe.get("calls", {}).items()},
        failures=probe.get("failures", {}),
        timed_out=timed_out,
        seconds=time.perf_counter() - started,
        log_tail=log[-3000:],
    )
