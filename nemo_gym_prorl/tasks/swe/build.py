# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""`prorl swe build`: SWE-bench-format instances from real projects, offline after one download.

SWE-smith style: for each recipe (`recipes/recipes.json`, committed with its bug diff):
  1. download the project's sdist from PyPI with this venv's pip (once; cached under
     `${PRORL_HOME:-~/.cache/prorl}/swe/sdists`, checked against the pinned sha256);
  2. unpack it into a git repository, commit it as `upstream` (fixed dates and author, so the
     commit ids are the same on every machine);
  3. remove the hidden test file(s), apply the committed bug diff, commit as the instance's
     base; `patch` (the gold patch) is the diff back to upstream outside the tests, i.e. the
     bug diff reversed; `test_patch` adds the hidden tests back; then the history is replaced by
     one root commit of the base tree (`base_commit`), so nothing in `.git` holds the answers;
  4. write the SWE-bench eval script (SWE-bench 5 layout: the script applies `test_patch` and
     runs pytest between the harness's output markers);
  5. validate in sandboxes, as SWE-smith does: run the tests without and with the gold patch;
     FAIL_TO_PASS = fail before and pass after, PASS_TO_PASS = pass in both. The recipe's
     `expected_fail_to_pass` must be among them, or the build fails.
The instances go to `instances.jsonl` next to the repositories.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from nemo_gym_prorl.files import sha256_of
from nemo_gym_prorl.tasks.swe.config import REPO_MOUNT, SweConfig

logger = logging.getLogger(__name__)

RECIPES_DIR = Path(__file__).with_name("recipes")
_GIT_ENV = {
    "GIT_AUTHOR_NAME": "prorl",
    "GIT_AUTHOR_EMAIL": "prorl@localhost",
    "GIT_COMMITTER_NAME": "prorl",
    "GIT_COMMITTER_EMAIL": "prorl@localhost",
    "GIT_AUTHOR_DATE": "2024-01-01T00:00:00+0000",
    "GIT_COMMITTER_DATE": "2024-01-01T00:00:00+0000",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
}
HEREDOC = "EOF_114329324912"  # the delimiter SWE-bench's own eval scripts use


class Recipe(BaseModel):
    instance_id: str
    project: str
    version: str
    sdist_sha256: str
    license: str
    upstream: str
    bug_diff: str
    hidden_test_files: list[str]
    pythonpath: list[str] = Field(default_factory=lambda: ["."])
    expected_fail_to_pass: list[str]
    problem_statement: str


def load_recipes(path: Path | None = None) -> list[Recipe]:
    path = path or RECIPES_DIR / "recipes.json"
    return [Recipe.model_validate(r) for r in json.loads(path.read_text())]


def _git(repo: Path, *args: str, input: str | None = None) -> str:
    env = {**os.environ, **_GIT_ENV}
    out = subprocess.run(
        ["git", *args], cwd=repo, env=env, input=input, capture_output=True, text=True, check=False
    )
    if out.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed in {repo}: {out.stderr.strip()}")
    return out.stdout


def _pip_command() -> list[str]:
    """This venv's own pip (a dependency of the package), never whichever `python3` is on PATH
    (uv has no command that downloads an sdist)."""
    probe = subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True, check=False)
    if probe.returncode != 0:
        raise RuntimeError(
            f"{sys.executable} has no pip, which nemo-gym-prorl depends on to download SWE sdists; "
            "reinstall the package (`make setup` in a checkout) or place the sdists in the cache"
        )
    return [sys.executable, "-m", "pip"]


def fetch_sdist(recipe: Recipe, sdists_dir: Path) -> Path:
    """The recipe's sdist from the cache, downloading it from PyPI with pip if needed."""
    sdists_dir.mkdir(parents=True, exist_ok=True)
    for candidate in sdists_dir.glob("*.tar.gz"):
        if sha256_of(candidate) == recipe.sdist_sha256:
            return candidate
    with tempfile.TemporaryDirectory(prefix="prorl-sdist-") as tmp:
        cmd = [*_pip_command(), "download", "--no-deps", "--no-binary", ":all:", "--disable-pip-version-check",
               "-q", "-d", tmp, f"{recipe.project}=={recipe.version}"]  # fmt: skip
        res = subprocess.run(cmd, capture_output=True, text=True, check=False)
        files = list(Path(tmp).glob("*.tar.gz"))
        if res.returncode != 0 or not files:
            raise RuntimeError(
                f"pip could not download {recipe.project}=={recipe.version}: {res.stderr[-1500:]}"
            )
        got = sha256_of(files[0])
        if got != recipe.sdist_sha256:
            raise RuntimeError(f"{files[0].name}: sha256 {got} != pinned {recipe.sdist_sha256}")
        target = sdists_dir / files[0].name
        shutil.move(files[0], target)
        return target


def _unpack(sdist: Path, dest: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="prorl-unpack-") as tmp, tarfile.open(sdist) as tar:
        tar.extractall(tmp, filter="data")
        tops = list(Path(tmp).iterdir())
        root = tops[0] if len(tops) == 1 and tops[0].is_dir() else Path(tmp)
        shutil.copytree(root, dest, symlinks=True)


def eval_script(recipe: Recipe, base_commit: str, test_patch: str) -> str:
    files = " ".join(shlex.quote(f) for f in recipe.hidden_test_files)
    pythonpath = ":".join(f"{REPO_MOUNT}/{p}".rstrip("/.") or REPO_MOUNT for p in recipe.pythonpath)
    lines = [
        "#!/bin/bash",
        "set -uxo pipefail",
        f"cd {REPO_MOUNT}",
        "export PYTHONDONTWRITEBYTECODE=1",
        f"export PYTHONPATH={pythonpath}",
        "git status --short >/dev/null",
        # the hidden tests are not in base_commit; drop any same-named file the patch created
        f"rm -f {files}",
        f"git apply -v - <<'{HEREDOC}'",
        test_patch.rstrip("\n"),
        HEREDOC,
        ": '>>>>> Start Test Output'",
        f"python -m pytest -rA -p no:cacheprovider -o addopts='' {files}",
        ": '>>>>> End Test Output'",
        f"rm -f {files}",
    ]
    return "\n".join(lines) + "\n"


def _root_commit_only(repo: Path, message: str) -> str:
    """Replace the repository's history by one root commit of its current tree; returns its id.

    The repository is what the policy gets at /testbed: a parent commit (or any object left in
    .git) holding the upstream code would hand it the gold patch and the hidden tests through
    `git log -p`. The fixed author and dates keep the id the same on every machine."""
    shutil.rmtree(repo / ".git")
    _git(repo, "init", "-q", "-b", "main")
    (repo / ".git" / "info").mkdir(parents=True, exist_ok=True)
    (repo / ".git" / "info" / "exclude").write_text("__pycache__/\n*.pyc\n.pytest_cache/\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", message)
    return _git(repo, "rev-parse", "HEAD").strip()


def has_history_beyond_base(repo: Path) -> bool:
    """True for a repository built before the root-commit-only layout (it holds the answers)."""
    return _git(repo, "rev-list", "--all", "--count").strip() != "1"


def build_repo(recipe: Recipe, config: SweConfig) -> dict[str, Any]:
    """Steps 1-4 for one recipe: the repository and the instance (without test lists)."""
    sdist = fetch_sdist(recipe, config.sdists_dir)
    repo = config.repos_dir / recipe.instance_id
    if repo.exists():
        shutil.rmtree(repo)
    repo.parent.mkdir(parents=True, exist_ok=True)
    _unpack(sdist, repo)
    _git(repo, "init", "-q", "-b", "main")
    (repo / ".git" / "info").mkdir(parents=True, exist_ok=True)
    (repo / ".git" / "info" / "exclude").write_text("__pycache__/\n*.pyc\n.pytest_cache/\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", f"{recipe.project} {recipe.version} (sdist)")
    upstream = _git(repo, "rev-parse", "HEAD").strip()
    for test_file in recipe.hidden_test_files:
        _git(repo, "rm", "-q", test_file)
    _git(repo, "apply", "--index", "-", input=(RECIPES_DIR / recipe.bug_diff).read_text())
    _git(repo, "commit", "-q", "-m", f"{recipe.instance_id}: base")
    base = _git(repo, "rev-parse", "HEAD").strip()
    test_patch = _git(repo, "diff", "--no-color", base, upstream, "--", *recipe.hidden_test_files)
    excludes = [f":(exclude){f}" for f in recipe.hidden_test_files]
    gold = _git(repo, "diff", "--no-color", base, upstream, "--", ".", *excludes)
    reverse_bug = _git(repo, "apply", "--check", "-R", "-", input=(RECIPES_DIR / recipe.bug_diff).read_text())
    del reverse_bug  # --check: the committed bug diff must reverse cleanly on base (raises otherwise)
    base = _root_commit_only(repo, f"{recipe.instance_id}: base")
    return {
        "instance_id": recipe.instance_id,
        "repo": recipe.upstream,
        "version": recipe.version,
        "base_commit": base,
        "problem_statement": recipe.problem_statement,
        "patch": gold,
        "test_patch": test_patch,
        "eval_script": eval_script(recipe, base, test_patch),
        "log_parser": "parse_log_pytest",
        "eval_type": "pass_and_fail",
        "image": "",
        "license": recipe.license,
        "source": f"pypi:{recipe.project}=={recipe.version} (sdist sha256 {recipe.sdist_sha256[:12]}...)",
        "FAIL_TO_PASS": [],
        "PASS_TO_PASS": [],
    }


async def _status_map(config: SweConfig, instance: dict[str, Any], patch: str) -> dict[str, str]:
    from swebench.harness.constants import END_TEST_OUTPUT, START_TEST_OUTPUT
    from swebench.harness.log_parsers import PARSER_REGISTRY

    from nemo_gym_prorl.tasks.swe.evaluate import apply_patch, open_instance_sandbox, run_eval_script

    sandbox = await open_instance_sandbox(config, instance)
    try:
        if patch:
            method, attempts = await apply_patch(sandbox, patch, config.apply_timeout_s)
            if method is None:
                raise RuntimeError(f"gold patch does not apply: {attempts}")
        log, timed_out, _ = await run_eval_script(sandbox, instance["eval_script"], config.eval_timeout_s,
                                                  config.max_log_bytes)  # fmt: skip
    finally:
        sandbox.close()
    if timed_out or START_TEST_OUTPUT not in log:
        raise RuntimeError(f"tests did not run for {instance['instance_id']}: {log[-2000:]}")
    sliced = log.split(START_TEST_OUTPUT, 1)[1].split(END_TEST_OUTPUT, 1)[0]
    return PARSER_REGISTRY[instance["log_parser"]](sliced, None)


async def validate(recipe: Recipe, instance: dict[str, Any], config: SweConfig) -> dict[str, Any]:
    """Step 5: FAIL_TO_PASS / PASS_TO_PASS from the project's own tests, before and after gold."""
    before = await _status_map(config, instance, "")
    after = await _status_map(config, instance, instance["patch"])
    passed = {"PASSED", "XFAIL"}
    f2p = sorted(t for t, s in after.items() if s in passed and before.get(t) not in passed)
    p2p = sorted(t for t, s in after.items() if s in passed and before.get(t) in passed)
    missing = sorted(set(recipe.expected_fail_to_pass) - set(f2p))
    if not f2p or missing:
        raise RuntimeError(
            f"{recipe.instance_id}: expected FAIL_TO_PASS {missing or '(any)'} not observed; got {f2p}"
        )
    return {**instance, "FAIL_TO_PASS": f2p, "PASS_TO_PASS": p2p}


async def build_all(config: SweConfig | None = None, only: list[str] | None = None) -> list[dict[str, Any]]:
    config = config or SweConfig()
    instances = []
    for recipe in load_recipes():
        if only and recipe.instance_id not in only:
            continue
        instance = await asyncio.to_thread(build_repo, recipe, config)
        instances.append(await validate(recipe, instance, config))
        logger.info("built %s: %d FAIL_TO_PASS, %d PASS_TO_PASS", recipe.instance_id,
                    len(instances[-1]["FAIL_TO_PASS"]), len(instances[-1]["PASS_TO_PASS"]))  # fmt: skip
    config.instances_path.parent.mkdir(parents=True, exist_ok=True)
    existing = {}
    if only and config.instances_path.exists():
        existing = {
            i["instance_id"]: i for i in map(json.loads, config.instances_path.read_text().splitlines())
        }
    existing.update({i["instance_id"]: i for i in instances})
    config.instances_path.write_text("".join(json.dumps(i) + "\n" for i in existing.values()))
    return instances


def load_instances(config: SweConfig | None = None) -> list[dict[str, Any]]:
    config = config or SweConfig()
    if not config.instances_path.exists():
        return []
    return [json.loads(line) for line in config.instances_path.read_text().splitlines() if line.strip()]


async def ensure_built(config: SweConfig | None = None) -> list[dict[str, Any]]:
    """The built instances, building those the cache lacks first (needs PyPI once per sdist)."""
    config = config or SweConfig()
    have = {i["instance_id"]: i for i in load_instances(config)}
    wanted = [r.instance_id for r in load_recipes()]
    todo = [
        i
        for i in wanted
        if i not in have
        or not (config.repos_dir / i / ".git").is_dir()
        or has_history_beyond_base(config.repos_dir / i)
    ]
    if todo:
        await build_all(config, only=todo)
        have = {i["instance_id"]: i for i in load_instances(config)}
    return [have[i] for i in wanted if i in have]
