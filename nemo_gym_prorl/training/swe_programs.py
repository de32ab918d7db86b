# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""What a program writes to demonstrate a SWE fix in a bash harness's format, from a training
instance's gold patch (program-written data, never a policy; held-out instances are never read).

A competent agent's four replies, each one bash block:

    1. locate: `grep -rn 'def <function>' --include='*.py' .` (the function, or class, the
       statement names and the fix touches, from the hunk's header);
    2. read: `sed -n '<first>,<last>p' <file>` (the lines the fix changes, with their context);
    3. edit: `python3 -c` that replaces the changed lines, with one line of context either side,
       and fails unless they occur exactly once (a wrong edit must not pass silently);
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
    old: str  # the changed lines with one line of context either side, as in the buggy file
    new: str  # the same lines after the fix


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
    first, last = max(changed[0] - 1, 0), min(changed[-1] + 1, len(body) - 1)
    window = body[first : last + 1]
    old = [line[1:] for line in window if line[:1] != "+"]
    new = [line[1:] for line in window if line[:1] != "-"]
    definition = _DEFINITION.search(context)
    return Fix(
        path=paths[0],
        first_line=start,
        last_line=start + count - 1,
        definition=definition.group(0) if definition else None,
        old="\n".join(old) + "\n",
        new="\n".join(new) + "\n",
    )


def locate_text(fix: Fix) -> str:
    """The first reply: find the function or class (or, without one, the file) the fix is in."""
    if fix.definition is not None:
        return bash_block(f"grep -rn {shlex.quote(fix.definition)} --include='*.py' .")
    return bash_block(f"grep -n '' {shlex.quote(fix.path)} | head -n {fix.last_line}")


def read_text(fix: Fix) -> str:
    """The second: show the lines the fix changes."""
    return bash_block(f"sed -n '{fix.first_line},{fix.last_line}p' {shlex.quote(fix.path)}")


def edit_text(fix: Fix) -> str:
    """The third: replace the lines, refusing unless they occur exactly once."""
    code = (
        f"import pathlib; p = pathlib.Path({fix.path!r}); s = p.read_text(); old = {fix.old!r}; "
        f"assert s.count(old) == 1, 'the lines to replace occur ' + str(s.count(old)) + ' times'; "
        f"p.write_text(s.replace(old, {fix.new!r}))"
    )
    return bash_block(f"python3 -c {shlex.quote(code)}")


def submit_text() -> str:
    """The last: submit, as the harness submits (the task grades the sandbox's diff)."""
    return bash_block(f"echo {SUBMIT_MARKER}")


def replies(patch: str) -> list[str]:
    """The four replies of one demonstration of `patch`."""
    fix = fix_of(patch)
    return [locate_text(fix), read_text(fix), edit_text(fix), submit_text()]
