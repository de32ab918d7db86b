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
import contextlib
import functools
import json
import logging
import shlex
import shutil
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import Field

from nemo_gym_prorl.files import exclusive, write_atomically
from nemo_gym_prorl.tasks.swe.config import REPO_MOUNT, SweConfig
from nemo_gym_prorl.tasks.swe.sdist_repo import (
    SdistPin,
    _git,
    fetch_sdist,
    has_history_beyond_base,
    make_instance_repo,
    unpack_sdist,
)

logger = logging.getLogger(__name__)

RECIPES_DIR = Path(__file__).with_name("recipes")
HEREDOC = "EOF_114329324912"  # the delimiter SWE-bench's own eval scripts use


class Recipe(SdistPin):
    instance_id: str
    bug_diff: str
    hidden_test_files: list[str]
    pythonpath: list[str] = Field(default_factory=lambda: ["."])
    expected_fail_to_pass: list[str]
    problem_statement: str


def load_recipes(path: Path | None = None) -> list[Recipe]:
    path = path or RECIPES_DIR / "recipes.json"
    return [Recipe.model_validate(r) for r in json.loads(path.read_text())]


def eval_script(recipe: Recipe, base_commit: str, test_patch: str) -> str:
    return render_eval_script(recipe.hidden_test_files, recipe.pythonpath, test_patch)


def pythonpath_inside(pythonpath: list[str]) -> str:
    """PYTHONPATH inside the sandbox for paths relative to the repository."""
    return ":".join(f"{REPO_MOUNT}/{p}".rstrip("/.") or REPO_MOUNT for p in pythonpath)


def render_eval_script(
    hidden_test_files: list[str], pythonpath: list[str], test_patch: str, pytest_args: str = ""
) -> str:
    """The SWE-bench eval script: restore the hidden tests from `test_patch`, run them with pytest
    between the harness's output markers, remove them again."""
    files = " ".join(shlex.quote(f) for f in hidden_test_files)
    extra = f"{pytest_args} " if pytest_args else ""
    lines = [
        "#!/bin/bash",
        "set -uxo pipefail",
        f"cd {REPO_MOUNT}",
        "export PYTHONDONTWRITEBYTECODE=1",
        f"export PYTHONPATH={pythonpath_inside(pythonpath)}",
        "git status --short >/dev/null",
        # the hidden tests are not in base_commit; drop any same-named file the patch created
        f"rm -f {files}",
        f"git apply -v - <<'{HEREDOC}'",
        test_patch.rstrip("\n"),
        HEREDOC,
        ": '>>>>> Start Test Output'",
        f"python -m pytest -rA -p no:cacheprovider -o addopts='' {extra}{files}",
        ": '>>>>> End Test Output'",
        f"rm -f {files}",
    ]
    return "\n".join(lines) + "\n"


def build_repo(recipe: Recipe, config: SweConfig) -> dict[str, Any]:
    """Steps 1-4 for one recipe: the repository and the instance (without test lists)."""
    sdist = fetch_sdist(recipe, config.sdists_dir)
    repo = config.repos_dir / recipe.instance_id
    if repo.exists():
        shutil.rmtree(repo)
    repo.parent.mkdir(parents=True, exist_ok=True)
    unpack_sdist(sdist, repo)
    bug_diff = (RECIPES_DIR / recipe.bug_diff).read_text()

    def apply_bug_diff(repo: Path) -> None:
        _git(repo, "apply", "--index", "-", input=bug_diff)
        # the committed bug diff must reverse cleanly on base (raises otherwise)
        _git(repo, "apply", "--check", "-R", "-", input=bug_diff)

    built = make_instance_repo(repo, recipe.hidden_test_files, apply_bug_diff, recipe.instance_id)
    return {
        "instance_id": recipe.instance_id,
        "repo": recipe.upstream,
        "version": recipe.version,
        "base_commit": built.base_commit,
        "problem_statement": recipe.problem_statement,
        "patch": built.patch,
        "test_patch": built.test_patch,
        "eval_script": eval_script(recipe, built.base_commit, built.test_patch),
        "log_parser": "parse_log_pytest",
        "eval_type": "pass_and_fail",
        "image": "",
        "license": recipe.license,
        "source": f"pypi:{recipe.project}=={recipe.version} (sdist sha256 {recipe.sdist_sha256[:12]}...)",
        "FAIL_TO_PASS": [],
        "PASS_TO_PASS": [],
    }


async def _status_map(config: SweConfig, instance: dict[str, Any], patch: str) -> dict[str, str]:
    from nemo_gym_prorl.tasks.swe.evaluate import (
        apply_patch,
        open_instance_sandbox,
        run_eval_script,
        test_statuses,
    )

    sandbox = await open_instance_sandbox(config, instance)
    try:
        if patch:
            method, attempts = await apply_patch(sandbox, patch, config.apply_timeout_s)
            if method is None:
                raise RuntimeError(f"gold patch does not apply: {attempts}")
        log, timed_out, _ = await run_eval_script(sandbox, instance["eval_script"], config.eval_timeout_s,
                                                  config.max_log_bytes)  # fmt: skip
    finally:
        await sandbox.aclose()
    statuses = None if timed_out else test_statuses(log, instance["log_parser"])
    if statuses is None:
        raise RuntimeError(f"tests did not run for {instance['instance_id']}: {log[-2000:]}")
    return statuses


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
    # Whole: a rollout's door check may read the file while another process builds.
    write_atomically(config.instances_path, "".join(json.dumps(i) + "\n" for i in existing.values()))
    return instances


def load_instances(config: SweConfig | None = None) -> list[dict[str, Any]]:
    config = config or SweConfig()
    if not config.instances_path.exists():
        return []
    return [json.loads(line) for line in config.instances_path.read_text().splitlines() if line.strip()]


@functools.cache
def recipe_ids() -> frozenset[str]:
    """The instances this project can build (its committed recipes), without building any."""
    return frozenset(r.instance_id for r in load_recipes())


async def ensure_built(
    config: SweConfig | None = None, only: Sequence[str] | None = None
) -> list[dict[str, Any]]:
    """The built instances (`only`: of these recipes), building those the cache lacks first
    (needs PyPI once per sdist). One build at a time per cache: a second process waits for the
    first, then finds it built."""
    config = config or SweConfig()
    # One coroutine of this process at a time takes the file lock; the rest wait here, on the
    # loop. Each waiting for the file lock would hold a thread of the default pool, and with
    # every thread waiting, the holder's build (run in that pool) could never run: the first
    # SWE rollouts of a burst on a new cache then stopped in INIT for good.
    async with _process_lock(config.cache_dir):
        with contextlib.ExitStack() as held:
            # Waiting for another process's build blocks a thread, not the event loop.
            await asyncio.to_thread(
                held.enter_context, exclusive(config.cache_dir / "build.lock", logger.info)
            )
            return await _ensure_built_locked(config, only)


_PROCESS_LOCKS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[Path, asyncio.Lock]] = (
    weakref.WeakKeyDictionary()
)


def _process_lock(cache_dir: Path) -> asyncio.Lock:
    """This event loop's lock on builds into `cache_dir`."""
    locks = _PROCESS_LOCKS.setdefault(asyncio.get_running_loop(), {})
    return locks.setdefault(cache_dir.resolve(), asyncio.Lock())


async def _ensure_built_locked(config: SweConfig, only: Sequence[str] | None) -> list[dict[str, Any]]:
    have = {i["instance_id"]: i for i in load_instances(config)}
    wanted = [r.instance_id for r in load_recipes() if only is None or r.instance_id in only]
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
