# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""INIT of a SWE instance: /testbed must be at the instance's base_commit or a descendant of it
(SWE-bench's images commit their set-up on top of it), never elsewhere; an image's hidden tests
stay out of the agent's sight and out of its patch."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from nemo_gym_prorl.sandbox import SandboxError, open_sandbox
from nemo_gym_prorl.tasks.swe import SweConfig, SweTask

GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@localhost"]


def commit(repo: Path, name: str) -> str:
    (repo / name).write_text(name + "\n")
    subprocess.run([*GIT, "add", "-A"], cwd=repo, check=True)
    subprocess.run([*GIT, "commit", "-qm", name], cwd=repo, check=True)
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, check=True, capture_output=True,
                          text=True).stdout.strip()  # fmt: skip


@pytest.mark.bwrap
async def test_workspace_at_a_descendant_of_base_commit_is_accepted_and_elsewhere_refused(
    tmp_path: Path,
) -> None:
    repo = tmp_path / "repos" / "demo__x-1"
    repo.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=repo, check=True)
    base = commit(repo, "base.txt")
    head = commit(repo, "environment-setup.txt")  # what an image's "SWE-bench" commit adds
    task = SweTask(SweConfig(cache_dir=tmp_path))
    row = {"instance_id": "demo__x-1", "base_commit": base, "eval_script": "", "FAIL_TO_PASS": [],
           "PASS_TO_PASS": []}  # fmt: skip
    for base_commit, accepted in ((base, True), (head, True), ("0" * 40, False)):
        sandbox = open_sandbox(task.sandbox_spec(row))
        try:
            if accepted:
                info = await task.setup_workspace(sandbox, {**row, "base_commit": base_commit})
                assert info["base_commit"] == head
            else:
                with pytest.raises(SandboxError, match="not at base_commit 000000000000 or a descendant"):
                    await task.setup_workspace(sandbox, {**row, "base_commit": base_commit})
        finally:
            sandbox.close()


@pytest.mark.bwrap
async def test_the_agent_never_sees_an_images_hidden_tests_and_its_patch_never_carries_them(
    tmp_path: Path,
) -> None:
    """R2E-Gym's layout: /testbed at the fix's parent (`<fix>^`), the hidden tests and the test
    command added to /testbed by the image, untracked."""
    repo = tmp_path / "repos" / "demo__r2e-1"
    repo.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=repo, check=True)
    commit(repo, "lib.py")
    fix = commit(repo, "fix.txt")
    subprocess.run(["git", "checkout", "-q", f"{fix}^"], cwd=repo, check=True)
    (repo / "r2e_tests").mkdir()
    (repo / "r2e_tests" / "test_1.py").write_text("def test_fix(): assert open('fix.txt')\n")
    (repo / "run_tests.sh").write_text("pytest -rA r2e_tests\n")
    task = SweTask(SweConfig(cache_dir=tmp_path))
    row = {"instance_id": "demo__r2e-1", "base_commit": f"{fix}^", "eval_script": "", "FAIL_TO_PASS": ["x"],
           "PASS_TO_PASS": [], "hidden_dirs": ["/testbed/r2e_tests"],
           "patch_exclude": ["run_tests.sh", "r2e_tests"]}  # fmt: skip
    assert task.config.sandbox_spec(row).hidden_dirs == []  # EVAL runs the hidden tests
    sandbox = open_sandbox(task.sandbox_spec(row))
    try:
        await task.setup_workspace(sandbox, row)
        seen = await sandbox.exec(
            ["/bin/sh", "-c", "ls -A /testbed/r2e_tests; echo fixed >> /testbed/lib.py"]
        )
        assert seen.ok and seen.stdout == ""
        patch = (await task.collect_artifacts(sandbox, row))["git_patch"]
    finally:
        sandbox.close()
    assert "+fixed" in patch and "b/lib.py" in patch
    assert "run_tests.sh" not in patch and "r2e_tests" not in patch
