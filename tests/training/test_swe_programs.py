# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""A SWE demonstration's replies, from a gold patch: they find the function, show the lines, make
exactly the patch's change (or fail loudly), and submit; a patch of more than one hunk is refused."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from nemo_gym_prorl.training.programs import DemonstrationError
from nemo_gym_prorl.training.swe_programs import fix_of, replies

# The gold patch of the built instance `inflection-ordinal-13` (tasks/swe/recipes, reversed).
ORDINAL = "\n".join(
    [
        "diff --git a/inflection/__init__.py b/inflection/__init__.py",
        "index 0d027fb..c18a0b6 100644",
        "--- a/inflection/__init__.py",
        "+++ b/inflection/__init__.py",
        "@@ -5,7 +5,7 @@ def ordinal(number: int) -> str:",
        " ",  # a blank context line
        '     """',
        "     number = abs(int(number))",
        "-    if number % 100 in (11, 12):",
        "+    if number % 100 in (11, 12, 13):",
        '         return "th"',
        "     else:",
        "         return {",
        "",
    ]
)

BUGGY = '''import re


def ordinal(number: int) -> str:
    """The suffix.

    """
    number = abs(int(number))
    if number % 100 in (11, 12):
        return "th"
    else:
        return {
            1: "st",
        }.get(number % 10, "th")
'''


def command(reply: str) -> str:
    match = re.fullmatch(r"```bash\n(.*)\n```", reply, re.DOTALL)
    assert match, reply
    return match.group(1)


def run(reply: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", command(reply)], cwd=cwd, capture_output=True, text=True, timeout=30)


def test_the_fix_is_the_patchs_one_hunk_with_a_line_of_context_either_side() -> None:
    fix = fix_of(ORDINAL)
    assert (fix.path, fix.definition, fix.first_line, fix.last_line) == (
        "inflection/__init__.py",
        "def ordinal",
        5,
        11,
    )
    assert fix.old == '    number = abs(int(number))\n    if number % 100 in (11, 12):\n        return "th"\n'
    assert (
        fix.new
        == '    number = abs(int(number))\n    if number % 100 in (11, 12, 13):\n        return "th"\n'
    )


def test_the_replies_locate_read_edit_and_submit_and_the_edit_is_the_patch(tmp_path: Path) -> None:
    source = tmp_path / "inflection" / "__init__.py"
    source.parent.mkdir()
    source.write_text(BUGGY)
    locate, read, edit, submit = replies(ORDINAL)
    assert run(locate, tmp_path).stdout == "./inflection/__init__.py:4:def ordinal(number: int) -> str:\n"
    assert "if number % 100 in (11, 12):" in run(read, tmp_path).stdout
    assert run(edit, tmp_path).returncode == 0
    assert source.read_text() == BUGGY.replace("(11, 12)", "(11, 12, 13)")
    assert run(submit, tmp_path).stdout.startswith("COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT")


def test_an_edit_whose_lines_are_not_there_exactly_once_fails_instead_of_passing(tmp_path: Path) -> None:
    source = tmp_path / "inflection" / "__init__.py"
    source.parent.mkdir()
    source.write_text(BUGGY + BUGGY)  # the lines twice: which one to change is not known
    done = run(replies(ORDINAL)[2], tmp_path)
    assert done.returncode != 0 and "occur 2 times" in done.stderr
    assert source.read_text() == BUGGY + BUGGY


def test_a_patch_of_two_hunks_or_two_files_is_refused() -> None:
    second = ORDINAL.split("@@ -5")[1]
    with pytest.raises(DemonstrationError, match="2 hunk"):
        fix_of(ORDINAL + "@@ -40" + second)
    other = ORDINAL.replace("inflection/__init__.py", "inflection/other.py")
    with pytest.raises(DemonstrationError, match="2 file"):
        fix_of(ORDINAL + other)
