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


def choice_pattern(letters: str) -> str:
    return f"Answer: [{re.escape(letters)}]"


def answer_pattern(row: Mapping[str, Any], formats: Mapping[str, str] | None = None) -> str | None:
    """The regex the final answer of this row must match, or None if its domain has no format."""
    if row.get("answer_type") == "mc":
        letters = row.get("letters")
        if not isinstance(letters, str) or not letters.isalpha():
            options = row.get("options") or []
            letters = "".join(k for option in options if isinstance(option, Mapping) for k in option)
        return choice_pattern(letters.upper() or "ABCD")
    return {**DOMAIN_FORMATS, **(formats or {})}.get(str(row.get("data_source")))
