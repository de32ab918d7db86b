# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The final-answer format of a task row, as a regex constrained decoding can enforce.

The formats are the ones each domain's evaluator reads (a `\\boxed{}` value for math and
numeric STEM, `Answer: X` for multiple choice, a ```python block for code), so a constrained
answer is always one the evaluator can score, right or wrong. Rows of other domains (SWE: the
patch is the answer) have none, and their final turn is left free.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

BOXED = r"\\boxed\{[^{}\n]{1,40}\}"
PYTHON_BLOCK = r"```python\n[^`]{1,400}\n```"

# data_source -> format, for rows that do not say more themselves (multiple choice does).
DOMAIN_FORMATS: dict[str, str] = {
    "prorl_math": BOXED,
    "prorl_stem": BOXED,
    "prorl_code": PYTHON_BLOCK,
}


# What the finish tool's `answer` argument may hold, where the evaluator reads a bare value: a
# choice letter, or a number (math rows whose reference is not a number can then not be solved
# under constraint; the constraint is a demo and smoke-test option, not for on-policy training).
NUMBER = r"^-?[0-9]{1,9}(\.[0-9]{1,6})?(/[0-9]{1,6})?$"
SUBMIT_FORMATS: dict[str, str] = {"prorl_math": NUMBER}


def choice_pattern(letters: str) -> str:
    return f"Answer: [{re.escape(letters)}]"


def _choice_letters(row: Mapping[str, Any]) -> str:
    letters = row.get("letters")
    if not isinstance(letters, str) or not letters.isalpha():
        options = row.get("options") or []
        letters = "".join(k for option in options if isinstance(option, Mapping) for k in option)
    return letters.upper() or "ABCD"


def submit_pattern(row: Mapping[str, Any]) -> str | None:
    """The regex the finish tool's `answer` must match for this row, or None (free text)."""
    if row.get("answer_type") == "mc":
        return f"^[{re.escape(_choice_letters(row))}]$"
    return SUBMIT_FORMATS.get(str(row.get("data_source")))


def answer_pattern(row: Mapping[str, Any], formats: Mapping[str, str] | None = None) -> str | None:
    """The regex the final answer of this row must match, or None if its domain has no format."""
    if row.get("answer_type") == "mc":
        return choice_pattern(_choice_letters(row))
    return {**DOMAIN_FORMATS, **(formats or {})}.get(str(row.get("data_source")))
