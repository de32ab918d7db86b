# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""PyPI sdists and instance repositories: the pinned sdist (pip, once, sha256-checked), its
unpacked tree, and the git repository an instance is built into (one root commit, fixed dates).
Shared by the hand-written recipes (`build.py`) and the generated instances (`generate.py`,
`materialize.py`); it runs no sandbox and no tests."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel

from nemo_gym_prorl.files import sha256_of

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


class SdistPin(BaseModel):
    """One project release on PyPI, pinned by its sdist's sha256."""

    project: str
    version: str
    sdist_sha256: str
    license: str
    upstream: str


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


def fetch_sdist(recipe: SdistPin, sdists_dir: Path) -> Path:
    """The pinned sdist from the cache, downloading it from PyPI with pip if needed."""
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


def fetch_sdists(pins: list[SdistPin], sdists_dir: Path) -> None:
    """Every pinned sdist into the cache with one pip run for those it lacks (pip's start-up,
    not the download, is most of the time for small sdists)."""
    sdists_dir.mkdir(parents=True, exist_ok=True)
    have = {sha256_of(f) for f in sdists_dir.glob("*.tar.gz")}
    missing = [p for p in pins if p.sdist_sha256 not in have]
    if not missing:
        return
    with tempfile.TemporaryDirectory(prefix="prorl-sdist-") as tmp:
        cmd = [*_pip_command(), "download", "--no-deps", "--no-binary", ":all:", "--disable-pip-version-check",
               "-q", "-d", tmp, *(f"{p.project}=={p.version}" for p in missing)]  # fmt: skip
        res = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if res.returncode != 0:
            names = ", ".join(f"{p.project}=={p.version}" for p in missing)
            raise RuntimeError(f"pip could not download {names}: {res.stderr[-1500:]}")
        got = {sha256_of(f): f for f in Path(tmp).glob("*.tar.gz")}
        for pin in missing:
            if pin.sdist_sha256 not in got:
                raise RuntimeError(f"{pin.project}=={pin.version}: no downloaded sdist has the pinned sha256")
            shutil.move(got[pin.sdist_sha256], sdists_dir / got[pin.sdist_sha256].name)


def unpack_sdist(sdist: Path, dest: Path) -> None:
    """The sdist's top folder, as it is, at `dest`."""
    with tempfile.TemporaryDirectory(prefix="prorl-unpack-") as tmp, tarfile.open(sdist) as tar:
        tar.extractall(tmp, filter="data")
        tops = list(Path(tmp).iterdir())
        root = tops[0] if len(tops) == 1 and tops[0].is_dir() else Path(tmp)
        shutil.copytree(root, dest, symlinks=True)


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


class InstanceRepo(BaseModel):
    """What building an instance's repository yields: its one commit and the two patches."""

    base_commit: str
    patch: str
    test_patch: str


def make_instance_repo(
    repo: Path, hidden_test_files: list[str], introduce_bug: Callable[[Path], None], message: str
) -> InstanceRepo:
    """Turn the upstream tree at `repo` into an instance repository, in place: commit it as
    upstream, remove the hidden tests, introduce the bug, commit; the gold patch is the diff back
    to upstream outside the tests, `test_patch` adds the tests back; then the history becomes one
    root commit of the base tree. Deterministic: the same tree and bug give the same ids."""
    _git(repo, "init", "-q", "-b", "main")
    (repo / ".git" / "info").mkdir(parents=True, exist_ok=True)
    (repo / ".git" / "info" / "exclude").write_text("__pycache__/\n*.pyc\n.pytest_cache/\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "upstream (sdist)")
    upstream = _git(repo, "rev-parse", "HEAD").strip()
    for test_file in hidden_test_files:
        _git(repo, "rm", "-q", test_file)
    introduce_bug(repo)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", f"{message}: base")
    base = _git(repo, "rev-parse", "HEAD").strip()
    test_patch = _git(repo, "diff", "--no-color", base, upstream, "--", *hidden_test_files)
    excludes = [f":(exclude){f}" for f in hidden_test_files]
    gold = _git(repo, "diff", "--no-color", base, upstream, "--", ".", *excludes)
    return InstanceRepo(base_commit=_root_commit_only(repo, f"{message}: base"), patch=gold,
                        test_patch=test_patch)  # fmt: skip
