# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""INIT of a SWE instance: /testbed must be at the instance's base_commit or a descendant of it
(SWE-bench's images commit their set-up on top of it), never elsewhere."""

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
