# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Problem statements for generated instances, written from the failing tests alone (their ids
and crash messages; no model). They never quote the fix or the mutated line: any message line
that holds a line the gold patch changes is withheld."""

from __future__ import annotations

MAX_TESTS = 5
MAX_MESSAGE_LINES = 6
MAX_LINE_CHARS = 200
# changed lines this short, or these, say nothing about the fix (a removed branch leaves `pass`)
_MIN_LEAK_CHARS = 5
_UNINFORMATIVE = frozenset({"pass", "else:", "break", "continue", "return", "try:", "finally:"})


class StatementLeakError(ValueError):
    """The failing tests cannot be described without quoting the fix or the bug."""


def changed_lines(patch: str) -> list[str]:
    """The lines a unified diff removes or adds, stripped (file headers excluded)."""
    out = []
    for line in patch.splitlines():
        if line.startswith(("+++", "---")) or not line.startswith(("+", "-")):
            continue
        text = line[1:].strip()
        if len(text) >= _MIN_LEAK_CHARS and text not in _UNINFORMATIVE:
            out.append(text)
    return out


def _message_block(message: str, forbidden: list[str]) -> list[str]:
    lines = [line.rstrip()[:MAX_LINE_CHARS] for line in message.strip().splitlines() if line.strip()]
    kept = [line for line in lines[:MAX_MESSAGE_LINES] if not any(f in line for f in forbidden)]
    if not kept:
        return []
    if len(kept) < len(lines):
        kept.append("...")
    return ["  ```", *(f"  {line}" for line in kept), "  ```"]


def write_statement(project: str, failing: list[str], failures: dict[str, str], patch: str) -> str:
    """The issue text: which tests fail and how, and that the library (not the tests) is at fault."""
    forbidden = changed_lines(patch)
    shown = failing[:MAX_TESTS]
    noun = "test fails" if len(failing) == 1 else "tests fail"
    title = f"{project}: {len(failing)} {noun} after a recent change"
    lines = [title, "", f"These tests of `{project}`'s own test suite passed before and fail now:", ""]
    for test in shown:
        lines.append(f"- `{test}`")
        lines.extend(_message_block(failures.get(test, ""), forbidden))
    if len(failing) > len(shown):
        lines.append(f"- ... and {len(failing) - len(shown)} more")
    lines += [
        "",
        "The tests are right; the library code is wrong. Fix the library so that these tests pass "
        "again, without breaking the tests that pass now.",
    ]
    statement = "\n".join(lines)
    leaked = [f for f in forbidden if f in statement]
    if leaked:  # only a test id could still hold one; such a candidate is not kept
        raise StatementLeakError(f"the statement would quote a changed line: {leaked[0]!r}")
    return statement
