# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Host-side reads and writes under a workspace never follow a symlink."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from nemo_gym_prorl.sandbox.workspace_fs import WorkspacePathError, read_no_follow, write_no_follow


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    workspace, outside = tmp_path / "ws", tmp_path / "outside"
    workspace.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    os.symlink(outside, workspace / "linkdir")
    os.symlink(outside / "secret.txt", workspace / "linkfile")
    return workspace, outside


def test_writes_create_directories_and_files_inside(layout: tuple[Path, Path]) -> None:
    workspace, _ = layout
    write_no_follow(workspace, ("a", "b", "c.txt"), b"data")
    assert read_no_follow(workspace, ("a", "b", "c.txt")) == b"data"


def test_a_symlinked_directory_or_file_is_refused(layout: tuple[Path, Path]) -> None:
    workspace, outside = layout
    with pytest.raises(WorkspacePathError):
        write_no_follow(workspace, ("linkdir", "evil.txt"), b"x")
    with pytest.raises(WorkspacePathError):
        write_no_follow(workspace, ("linkfile",), b"x")
    with pytest.raises(WorkspacePathError):
        read_no_follow(workspace, ("linkfile",))
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == "secret"


def test_dotdot_components_and_fifos_are_refused(layout: tuple[Path, Path]) -> None:
    workspace, _ = layout
    with pytest.raises(WorkspacePathError):
        write_no_follow(workspace, ("..", "outside", "x.txt"), b"x")
    os.mkfifo(workspace / "pipe")
    with pytest.raises(WorkspacePathError):
        read_no_follow(workspace, ("pipe",))
