# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""STEM: multiple choice (letter extraction from free text) and numeric answers with units.

Multiple choice: the answer letter is taken from, in order of precedence, `\\boxed{C}`, an
explicit statement ("Answer: (C)", "the answer is c", "correct option: **C**"), or a last line
that is only a letter ("C", "(C)", "C."). The last match of the strongest kind wins; only
letters of the row's options count.

Numeric: a number (decimal, scientific `1.2e-3`, LaTeX `1.2 \\times 10^{-3}`, `10^-4`, unicode
`\u00d710\u207b\u2074`) optionally followed by a unit. Units with SI prefixes are converted to the gold
answer's unit (eV vs meV, km vs m, ...); a unit of a different dimension is wrong; a bare
number is read in the gold unit. Equality within a relative tolerance (row `rel_tol`,
default 1%).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from nemo_gym_prorl.pipeline.handler import InvalidInstanceError
from nemo_gym_prorl.tasks.base import IPYTHON, SUBMIT, EvalOutcome, TaskDomain, strip_thinking
from nemo_gym_prorl.tasks.math import extract_boxed

# -- multiple choice --------------------------------------------------------------------------

_LETTER = r"\(?\[?\**\s*([A-Za-z])\s*\**\)?\]?"
_EXPLICIT = [
    re.compile(
        r"(?:final\s+answer|correct\s+(?:answer|option|choice)|answer|option|choice)\s*(?:is|:|=|-)?\s*"
        r"(?:option\s+|choice\s+)?" + _LETTER + r"(?=[\s).,:;!*\]]|$)",
        re.I,
    ),
]
_LINE = re.compile(r"^\s*\**\s*\(?([A-Za-z])\)?\s*[.:)]?\s*\**\s*$")
# "Answer: I think it is F": with nine or more options (MMLU-Pro's A-J) the pronoun is a letter
# too; a bare "I" followed by a lower-case word is the pronoun.
_PRONOUN_I = re.compile(r"[ \t]+[a-z]")
# A reply that opens with an option label and its text: "D: Chromosome painting", "(B) 4 m/s".
_LEADING = re.compile(r"^\s*\**\s*(?:\(([A-Z])\)|([A-Z])\s*[.:)])\s*\**\s+\S")


def _valid(letter: str, letters: str, strict_case: bool) -> str | None:
    if strict_case and not letter.isupper():
        return None
    up = letter.upper()
    return up if up in letters else None


def extract_choice(text: str | None, letters: str = "ABCD") -> tuple[str | None, str]:
    """(letter, how) with how in boxed | explicit | last_line | leading | none."""
    if not text:
        return None, "none"
    text = strip_thinking(text)
    letters = letters.upper()
    boxed = extract_boxed(text)
    if boxed is not None:
        inner = re.sub(r"\\text(?:bf)?\{([^{}]*)\}", r"\1", boxed)
        m = re.fullmatch(r"\s*\(?([A-Za-z])\)?\s*(?:[.:)].*)?", inner, re.S)
        if m and (letter := _valid(m.group(1), letters, strict_case=False)):
            return letter, "boxed"
    found: list[tuple[int, str]] = []
    for pattern in _EXPLICIT:
        for m in pattern.finditer(text):
            raw = m.group(1)
            if raw == "I" and _PRONOUN_I.match(text, m.end(1)):
                continue
            # lower-case letters only when clearly standalone: "the answer is c." but not "is a bit"
            after = text[m.end(1) :].lstrip("*)] ")
            standalone = not after or after[0] in ".,;:!\n"
            letter = _valid(raw, letters, strict_case=not standalone)
            if letter:
                found.append((m.start(), letter))
    if found:
        return max(found)[1], "explicit"
    for line in reversed([ln for ln in text.strip().splitlines() if ln.strip()][-3:]):
        m = _LINE.match(line)
        if m and (letter := _valid(m.group(1), letters, strict_case=True)):
            return letter, "last_line"
    m = _LEADING.match(text)
    if m and (letter := _valid(m.group(1) or m.group(2), letters, strict_case=True)):
        return letter, "leading"
    return None, "none"


# -- numbers with units -----------------------------------------------------------------------

_SUPERSCRIPTS = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺", "0123456789-+")
_NUM = r"[-+\u2212]?(?:\d[\d,]*\.?\d*|\.\d+)(?:[eE][-+\u2212]?\d+)?"
_UNIT = r"(?P<unit>[A-Za-zµμΩ°/^\-\d\s.·*()]*?)"
_POWER = re.compile(
    rf"^\s*(?:(?P<num>{_NUM})\s*(?:\\times|\\cdot|[x\u00d7*\u00b7])\s*)?10\s*\^\s*\{{?\s*(?P<exp>[-+\u2212]?\d+)\s*\}}?\s*{_UNIT}\s*$"
)
_PLAIN = re.compile(rf"^\s*(?P<num>{_NUM})\s*{_UNIT}\s*$")
_SUPER_RUN = re.compile(r"([⁻⁺]?[⁰¹²³⁴⁵⁶⁷⁸⁹]+)")

_PREFIXES = {"y": 1e-24, "z": 1e-21, "a": 1e-18, "f": 1e-15, "p": 1e-12, "n": 1e-9, "u": 1e-6, "µ": 1e-6,
             "μ": 1e-6, "m": 1e-3, "c": 1e-2, "d": 1e-1, "": 1.0, "da": 1e1, "h": 1e2, "k": 1e3, "M": 1e6,
             "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}  # fmt: skip
# base unit -> (dimension, factor to the dimension's SI unit)
_BASES = {"m": ("length", 1.0), "g": ("mass", 1e-3), "s": ("time", 1.0), "J": ("energy", 1.0),
          "eV": ("energy", 1.602176634e-19), "N": ("force", 1.0), "Pa": ("pressure", 1.0),
          "W": ("power", 1.0), "V": ("voltage", 1.0), "A": ("current", 1.0), "K": ("temperature", 1.0),
          "mol": ("amount", 1.0), "L": ("volume", 1e-3), "Hz": ("frequency", 1.0), "C": ("charge", 1.0),
          "T": ("magnetic_field", 1.0), "Ω": ("resistance", 1.0), "ohm": ("resistance", 1.0),
          "M": ("concentration", 1.0), "atm": ("pressure", 101325.0), "bar": ("pressure", 1e5),
          "cal": ("energy", 4.184), "Da": ("mass", 1.66053906660e-27)}  # fmt: skip


def unit_factor(unit: str) -> tuple[str, float] | None:
    """(dimension, factor to SI) of a simple unit such as 'meV', 'km', 'ms'; compound units
    (m/s, J/mol) compare by their normalised spelling instead (dimension = the spelling)."""
    u = unit.strip().replace("μ", "µ").replace("\\Omega", "Ω").replace("\\mu ", "µ").replace("\\mu", "µ")
    u = re.sub(r"\\(?:text|mathrm)\{([^{}]*)\}", r"\1", u).strip()
    if not u:
        return None
    if u in _BASES:
        return _BASES[u]
    for prefix, scale in sorted(_PREFIXES.items(), key=lambda kv: -len(kv[0])):
        if prefix and u.startswith(prefix) and u[len(prefix) :] in _BASES:
            dim, factor = _BASES[u[len(prefix) :]]
            return dim, factor * scale
    return re.sub(r"\s+", "", u), 1.0


def parse_quantity(text: str) -> tuple[float, str | None] | None:
    """(value, unit or None) of strings like '10^-4 eV', '3.2 \\times 10^{-4} eV', '-0.7', '1,200 m/s'."""
    if not text:
        return None
    s = _SUPER_RUN.sub(lambda m: "^{" + m.group(1).translate(_SUPERSCRIPTS) + "}", text)
    s = s.replace("\u2212", "-").replace("$", "")
    s = re.sub(r"\\(?:text|mathrm)\{([^{}]*)\}", r" \1", s)
    s = s.replace("\\,", " ").replace("\\ ", " ").replace("~", " ").strip().rstrip(".")
    m = _POWER.match(s) or _PLAIN.match(s)
    if not m:
        return None
    try:
        value = float(m.group("num").replace(",", "")) if m.group("num") else 1.0
        if "exp" in m.groupdict() and m.group("exp") is not None:
            value *= 10.0 ** int(m.group("exp").replace("\u2212", "-"))
    except (ValueError, OverflowError):
        return None
    if not math.isfinite(value):
        return None
    unit = m.group("unit").strip() or None
    return value, unit


def quantities_match(gold: str, pred: str, rel_tol: float = 0.01) -> tuple[bool, str]:
    g, p = parse_quantity(gold), parse_quantity(pred)
    if g is None:
        return False, "bad_gold"
    if p is None:
        return False, "unparseable_answer"
    (gv, gu), (pv, pu) = g, p
    if gu and pu:
        gd, pd = unit_factor(gu), unit_factor(pu)
        if gd is None or pd is None or gd[0] != pd[0]:
            return False, "wrong_unit"
        gv, pv = gv * gd[1], pv * pd[1]
    ok = math.isclose(gv, pv, rel_tol=rel_tol, abs_tol=0.0) or (gv == 0 and abs(pv) < 1e-12)
    return ok, "correct" if ok else "wrong_value"


class StemTask(TaskDomain):
    name = "stem"
    data_sources = ("prorl_stem", "stem", "gpqa", "mcqa")
    default_tools = (IPYTHON, SUBMIT)

    def check_row(self, row: Mapping[str, Any]) -> None:
        super().check_row(row)
        gold = row.get("expected_answer")
        if not isinstance(gold, str) or not gold.strip():
            raise InvalidInstanceError(
                "expected_answer", "is missing or empty: a STEM row needs the correct letter or quantity"
            )

    async def evaluate(
        self, row: Mapping[str, Any], final_text: str | None, artifacts: Mapping[str, Any] | None = None
    ) -> EvalOutcome:
        gold = row.get("expected_answer")
        if not isinstance(gold, str) or not gold.strip():
            return EvalOutcome.zero("bad_row", "row has no expected_answer")
        kind = row.get("answer_type") or ("mc" if re.fullmatch(r"[A-Za-z]", gold.strip()) else "numeric")
        if kind == "mc":
            letters = row.get("letters")
            if not isinstance(letters, str) or not letters:
                options = row.get("options") or []
                letters = "".join(k for opt in options if isinstance(opt, Mapping) for k in opt) or "ABCD"
            letter, how = extract_choice(final_text, letters)
            if letter is None:
                return EvalOutcome.zero(
                    "no_answer", "no answer letter found", report={"extracted_answer": None}
                )
            ok = letter == gold.strip().upper()
            return EvalOutcome.from_components(
                {"accuracy": float(ok)}, reason="correct" if ok else "wrong_answer",
                report={"extracted_answer": letter, "expected_answer": gold, "extracted_by": how},
            )  # fmt: skip
        if not final_text:
            return EvalOutcome.zero("no_answer", "empty final message")
        pred = extract_boxed(final_text)
        if pred is None:
            m = re.findall(r"(?:answer|result)\s*(?:is|:|=)\s*([^\n]+)", strip_thinking(final_text), re.I)
            pred = m[-1].strip() if m else None
        if pred is None:
            return EvalOutcome.zero(
                "no_answer", "no boxed or stated answer", report={"extracted_answer": None}
            )
        rel_tol = row.get("rel_tol")
        rel_tol = float(rel_tol) if isinstance(rel_tol, (int, float)) and rel_tol > 0 else 0.01
        ok, reason = quantities_match(gold, pred[:500], rel_tol)
        if reason == "bad_gold":
            return EvalOutcome.zero("bad_row", f"expected answer {gold!r} is not a quantity")
        return EvalOutcome.from_components(
            {"accuracy": float(ok)}, reason=reason,
            report={"extracted_answer": pred[:500], "expected_answer": gold, "rel_tol": rel_tol},
        )  # fmt: skip
