# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""A SWE demonstration's replies, from a gold patch: they find the function, show the numbered
lines, make exactly the patch's change by those numbers, and submit; a patch of more than one hunk
is refused."""

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


def test_the_fix_is_the_patchs_one_hunk_and_the_buggy_lines_it_replaces() -> None:
    fix = fix_of(ORDINAL)
    assert (fix.path, fix.definition, fix.first_line, fix.last_line) == (
        "inflection/__init__.py",
        "def ordinal",
        5,
        11,
    )
    assert fix.replaced == (8, 8)
    assert fix.new == ("    if number % 100 in (11, 12, 13):",)


def test_the_replies_locate_read_edit_and_submit_and_the_edit_is_the_patch(tmp_path: Path) -> None:
    source = tmp_path / "inflection" / "__init__.py"
    source.parent.mkdir()
    source.write_text(BUGGY)
    locate, read, edit, submit = replies(ORDINAL)
    assert run(locate, tmp_path).stdout == "./inflection/__init__.py:4:def ordinal(number: int) -> str:\n"
    assert "8:    if number % 100 in (11, 12):" in run(read, tmp_path).stdout
    assert command(edit) == "sed -i '8c\\    if number % 100 in (11, 12, 13):' inflection/__init__.py"
    assert run(edit, tmp_path).returncode == 0
    assert source.read_text() == BUGGY.replace("(11, 12)", "(11, 12, 13)")
    assert run(submit, tmp_path).stdout.startswith("COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT")


# A removed early return, restored: the fix only adds lines, so the line before them is replaced by
# itself and them; the restored line has quotes and a backslash, which the edit must keep.
RESTORE = "\n".join(
    [
        "diff --git a/pkg/text.py b/pkg/text.py",
        "--- a/pkg/text.py",
        "+++ b/pkg/text.py",
        "@@ -1,4 +1,6 @@ def clean(s):",
        " def clean(s):",
        "     if not s:",
        "+        return 'it\\'s \\\\ \"empty\"'",
        "+    # and the rest",
        "     return s.strip()",
        " ",
        "",
    ]
)
RESTORE_BUGGY = "def clean(s):\n    if not s:\n    return s.strip()\n\n"


def test_a_fix_that_only_adds_lines_rewrites_the_line_before_them_and_keeps_quotes_and_backslashes(
    tmp_path: Path,
) -> None:
    fix = fix_of(RESTORE)
    assert fix.replaced == (2, 2)
    assert fix.new == ("    if not s:", "        return 'it\\'s \\\\ \"empty\"'", "    # and the rest")
    source = tmp_path / "pkg" / "text.py"
    source.parent.mkdir()
    source.write_text(RESTORE_BUGGY)
    assert run(replies(RESTORE)[2], tmp_path).returncode == 0
    assert source.read_text() == (
        "def clean(s):\n    if not s:\n        return 'it\\'s \\\\ \"empty\"'\n    # and the rest\n"
        "    return s.strip()\n\n"
    )


def test_a_line_with_single_quotes_is_edited_in_double_quotes_when_nothing_there_is_special(
    tmp_path: Path,
) -> None:
    patch = "\n".join(
        [
            "--- a/pkg/words.py",
            "+++ b/pkg/words.py",
            "@@ -1,2 +1,2 @@ def dasherize(word):",
            " def dasherize(word):",
            "-    return word.replace('-', '_')",
            "+    return word.replace('_', '-')",
            "",
        ]
    )
    edit = replies(patch)[2]
    assert command(edit) == """sed -i "2c\\    return word.replace('_', '-')" pkg/words.py"""
    source = tmp_path / "pkg" / "words.py"
    source.parent.mkdir()
    source.write_text("def dasherize(word):\n    return word.replace('-', '_')\n")
    assert run(edit, tmp_path).returncode == 0
    assert source.read_text() == "def dasherize(word):\n    return word.replace('_', '-')\n"


def test_a_patch_that_only_adds_lines_at_its_hunks_start_is_refused() -> None:
    # no line of the hunk comes before the addition, so no line can be rewritten to hold it
    with pytest.raises(DemonstrationError, match="adds lines before any line"):
        fix_of("--- a/pkg/x.py\n+++ b/pkg/x.py\n@@ -1,1 +1,2 @@\n+import os\n x = 1\n")


def test_a_patch_of_two_hunks_or_two_files_is_refused() -> None:
    second = ORDINAL.split("@@ -5")[1]
    with pytest.raises(DemonstrationError, match="2 hunk"):
        fix_of(ORDINAL + "@@ -40" + second)
    other = ORDINAL.replace("inflection/__init__.py", "inflection/other.py")
    with pytest.raises(DemonstrationError, match="2 file"):
        fix_of(ORDINAL + other)
