# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Where `derive.py` reads NeMo RL's source from: a checkout on disk or a git directory at a revision."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol


class SourceTree(Protocol):
    """Reads a file of the NeMo RL tree and the commit a submodule path pins."""

    def read(self, relpath: str) -> str | None: ...

    def gitlink(self, relpath: str) -> str | None: ...


def _gitlink(args: list[str]) -> str | None:
    """The commit a submodule path pins (a `160000 commit <sha>` tree entry), if any."""
    proc = subprocess.run(["git", *args], capture_output=True, text=True)
    parts = proc.stdout.split()
    return parts[2] if proc.returncode == 0 and len(parts) >= 3 and parts[1] == "commit" else None


@dataclass
class DirTree:
    root: Path

    def read(self, relpath: str) -> str | None:
        path = self.root / relpath
        return path.read_text() if path.is_file() else None

    def gitlink(self, relpath: str) -> str | None:
        return _gitlink(["-C", str(self.root), "ls-tree", "HEAD", relpath])

    def commit(self) -> str:
        """The checkout's HEAD, or "unknown" for a tree that is not a git checkout."""
        head = subprocess.run(
            ["git", "-C", str(self.root), "rev-parse", "HEAD"], capture_output=True, text=True
        )
        return head.stdout.strip() if head.returncode == 0 else "unknown"


@dataclass
class GitTree:
    git_dir: Path
    rev: str

    def read(self, relpath: str) -> str | None:
        proc = subprocess.run(
            ["git", "--git-dir", str(self.git_dir), "show", f"{self.rev}:{relpath}"],
            capture_output=True,
            text=True,
        )
        return proc.stdout if proc.returncode == 0 else None

    def gitlink(self, relpath: str) -> str | None:
        return _gitlink(["--git-dir", str(self.git_dir), "ls-tree", self.rev, relpath])

    def commit(self) -> str:
        out = subprocess.run(
            ["git", "--git-dir", str(self.git_dir), "rev-parse", self.rev],
            capture_output=True,
            text=True,
            check=True,
        )
        return out.stdout.strip()
