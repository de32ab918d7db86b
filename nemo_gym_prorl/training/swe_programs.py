# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""What a program writes to demonstrate a SWE fix in a bash harness's format, from a training
instance's gold patch (program-written data, never a policy; held-out instances are never read).

A competent agent's four replies, each one bash block:

    1. locate: `grep -rn 'def <function>' --include='*.py' .` (the function, or class, the
       statement names and the fix touches, from the hunk's header);
    2. read: `grep -n '' <file> | sed -n '<first>,<last>p'` (the lines the fix changes, with
       their context, each after its number);
    3. edit: `sed -i '<a>,<b>c\\<new lines>' <file>`: the wrong lines, by the numbers the read
       showed, replaced by the right ones (a fix that only adds lines replaces the line before
       them with itself and them). Short on purpose: a small model writes a one-token change into
       a line it copies, where repeating the lines to replace (`python3 -c` with `str.replace`)
       took 140-290 tokens, past the reply budget for the longest;
    4. submit: the harness's marker (the SWE task grades the sandbox's `git diff` itself).

The demonstration is one file and one hunk: generated instances are one mutation each; a patch
of more is refused (`DemonstrationError`), not half demonstrated.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from nemo_gym_prorl.training.programs import SUBMIT_MARKER, DemonstrationError, bash_block

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+\d+(?:,\d+)? @@ ?(.*)$")
_DEFINITION = re.compile(r"\b(?:def|class)\s+\w+")


@dataclass(frozen=True)
class Fix:
    """One hunk of a gold patch: where it is and what it replaces."""

    path: str
    first_line: int  # the hunk's first line in the buggy file
    last_line: int
    definition: str | None  # `def f` or `class C`: what the hunk header names (git's context line)
    replaced: tuple[int, int]  # the buggy file's lines the fix replaces, first and last
    new: tuple[str, ...]  # the lines that replace them


def fix_of(patch: str) -> Fix:
    """The one hunk of a one-file gold patch."""
    paths = re.findall(r"^\+\+\+ b/(\S+)$", patch, re.MULTILINE)
    hunks = [i for i, line in enumerate(patch.splitlines()) if line.startswith("@@")]
    if len(paths) != 1 or len(hunks) != 1:
        raise DemonstrationError(
            f"a demonstrated fix is one hunk of one file; this patch has {len(hunks)} hunk(s) in {len(paths)} file(s)"
        )
    lines = patch.splitlines()
    header = _HUNK.match(lines[hunks[0]])
    if header is None:
        raise DemonstrationError(f"unreadable hunk header {lines[hunks[0]]!r}")
    start, count, context = int(header.group(1)), int(header.group(2) or 1), header.group(3)
    body = [line for line in lines[hunks[0] + 1 :] if line[:1] in (" ", "-", "+") or line == ""]
    changed = [i for i, line in enumerate(body) if line[:1] in ("-", "+")]
    if not changed:
        raise DemonstrationError("the patch changes no line")
    first, last = changed[0], changed[-1]
    if not any(body[i][:1] == "-" for i in changed):
        if first == 0:
            raise DemonstrationError("the patch adds lines before any line of its hunk")
        first -= 1  # only added lines: the line before them is replaced by itself and them
    # buggy-file line numbers: each line of the hunk that is not an addition is one of its lines
    numbers: list[int] = []
    at = start
    for line in body:
        numbers.append(at)
        if line[:1] != "+":
            at += 1
    window = body[first : last + 1]
    olds = [numbers[first + i] for i, line in enumerate(window) if line[:1] != "+"]
    definition = _DEFINITION.search(context)
    return Fix(
        path=paths[0],
        first_line=start,
        last_line=start + count - 1,
        definition=definition.group(0) if definition else None,
        replaced=(olds[0], olds[-1]),
        new=tuple(line[1:] for line in window if line[:1] != "-"),
    )


def locate_text(fix: Fix) -> str:
    """The first reply: find the function or class (or, without one, the file) the fix is in."""
    if fix.definition is not None:
        return bash_block(f"grep -rn {shlex.quote(fix.definition)} --include='*.py' .")
    return bash_block(f"grep -n '' {shlex.quote(fix.path)} | head -n {fix.last_line}")


def read_text(fix: Fix) -> str:
    """The second: show the lines the fix changes, each after its number (the edit's addresses)."""
    return bash_block(f"grep -n '' {shlex.quote(fix.path)} | sed -n '{fix.first_line},{fix.last_line}p'")


def edit_text(fix: Fix) -> str:
    """The third: replace the wrong lines, by number, with the right ones (`sed`'s `c` command;
    its text keeps leading spaces, takes `\\n` between lines and `\\\\` for a backslash)."""
    first, last = fix.replaced
    address = str(first) if first == last else f"{first},{last}"
    if fix.new:
        text = "\\n".join(line.replace("\\", "\\\\") for line in fix.new)
        script = f"{address}c\\{text}"
    else:
        script = f"{address}d"
    return bash_block(f"sed -i {_quoted(script)} {shlex.quote(fix.path)}")


def _quoted(script: str) -> str:
    """The script as a person quotes it: in single quotes when it has none, in double quotes when
    nothing in it is special there (no `"`, `$`, backtick or doubled backslash), else `shlex`'s
    quoting (`'"'"'` for each single quote, correct but long)."""
    if "'" not in script:
        return f"'{script}'"
    if not any(special in script for special in ('"', "$", "`", "\\\\")):
        return f'"{script}"'
    return shlex.quote(script)


def submit_text() -> str:
    """The last: submit, as the harness submits (the task grades the sandbox's diff)."""
    return bash_block(f"echo {SUBMIT_MARKER}")


def replies(patch: str) -> list[str]:
    """The four replies of one demonstration of `patch`."""
    fix = fix_of(patch)
    return [locate_text(fix), read_text(fix), edit_text(fix), submit_text()]
