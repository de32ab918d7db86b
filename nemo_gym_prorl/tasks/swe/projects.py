# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The projects SWE instances are generated from (`projects.json`): pure-Python PyPI releases,
permissively licensed, whose sdists ship test suites that run with pytest on the sandbox runtime
alone. Each is pinned by version and sdist sha256; its unpacked tree is cached once and never
changed (every instance's repository is built from a copy)."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

from pydantic import Field

from nemo_gym_prorl.tasks.swe.config import SweConfig
from nemo_gym_prorl.tasks.swe.sdist_repo import SdistPin, fetch_sdist, unpack_sdist

PROJECTS_FILE = Path(__file__).with_name("projects.json")


class Project(SdistPin):
    shape: str = Field("", description="What kind of code it is (for the catalogue).")
    source: list[str] = Field(description="Files or folders whose functions may be mutated.")
    exclude_source: list[str] = Field(default_factory=list)
    tests: list[str] = Field(description="Test files or folders (pytest's test_*.py / *_test.py).")
    exclude_tests: list[str] = Field(default_factory=list)
    pythonpath: list[str] = Field(default_factory=lambda: ["."])

    @property
    def key(self) -> str:
        return f"{self.project}-{self.version}"


def load_projects(path: Path | None = None) -> list[Project]:
    return [Project.model_validate(p) for p in json.loads((path or PROJECTS_FILE).read_text())]


def _excluded(rel: str, excludes: list[str]) -> bool:
    return any(rel == e or rel.startswith(e.rstrip("/") + "/") for e in excludes)


def _python_files(tree: Path, entries: list[str], excludes: list[str], tests_only: bool) -> list[str]:
    out: set[str] = set()
    for entry in entries:
        path = tree / entry
        files = [path] if path.is_file() else sorted(path.rglob("*.py"))
        for f in files:
            rel = f.relative_to(tree).as_posix()
            is_test = f.name.startswith("test_") or f.name.endswith("_test.py")
            if _excluded(rel, excludes) or (tests_only and path.is_dir() and not is_test):
                continue
            out.add(rel)
    return sorted(out)


def list_test_files(project: Project, tree: Path) -> list[str]:
    """The test files the project's tests run from, relative to the repository."""
    return _python_files(tree, project.tests, project.exclude_tests, tests_only=True)


def list_source_files(project: Project, tree: Path) -> list[str]:
    """The files whose functions may be mutated (never a test file)."""
    tests = set(list_test_files(project, tree))
    return [f for f in _python_files(tree, project.source, project.exclude_source, tests_only=False)
            if f not in tests]  # fmt: skip


def upstream_tree(project: Project, config: SweConfig) -> Path:
    """The unpacked sdist, cached under `generated/upstream/<project>-<version>` (downloaded once)."""
    tree = config.generated_dir / "upstream" / project.key
    if (tree / ".complete").is_file():
        return tree
    sdist = fetch_sdist(project, config.sdists_dir)
    tree.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{project.key}-", dir=tree.parent) as tmp:
        staged = Path(tmp) / "tree"
        unpack_sdist(sdist, staged)
        (staged / ".complete").write_text(project.sdist_sha256 + "\n")
        if tree.exists():
            shutil.rmtree(tree)
        staged.rename(tree)
    return tree


def copy_upstream(tree: Path, dest: Path) -> None:
    """A working copy of the upstream tree (without the cache's completion marker)."""
    shutil.copytree(tree, dest, symlinks=True, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".complete"))
