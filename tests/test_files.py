# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The shared file primitives: a file replaced whole, or not at all."""

from __future__ import annotations

from pathlib import Path

import pytest

from nemo_gym_prorl.files import write_atomically


def test_a_file_is_replaced_whole_and_nothing_else_is_left_beside_it(tmp_path: Path) -> None:
    path = tmp_path / "cache" / "instances.jsonl"
    write_atomically(path, "old\n")
    write_atomically(path, "new\n")
    assert path.read_text() == "new\n" and oct(path.stat().st_mode & 0o777) == "0o644"
    assert [p.name for p in path.parent.iterdir()] == ["instances.jsonl"]


def test_a_write_that_fails_keeps_the_old_file_and_leaves_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "instances.jsonl"
    write_atomically(path, "old\n")
    with pytest.raises(UnicodeEncodeError):
        write_atomically(path, "\udcff")  # a lone surrogate: not encodable
    assert path.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["instances.jsonl"]
