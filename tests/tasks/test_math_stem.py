# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Math and STEM graders: equivalents pass, near misses fail, garbage and hangs are bounded."""

from collections.abc import AsyncIterator

import pytest

from nemo_gym_prorl.datasets.sources import math_row, reasoning_gym_problem
from nemo_gym_prorl.tasks.math import (
    MathConfig,
    MathTask,
    exact_form_equal,
    extract_boxed,
    plain_number_equal,
)
from nemo_gym_prorl.tasks.stem import StemTask, extract_choice, parse_quantity


@pytest.mark.parametrize(("text", "want"), [
    ("so \\boxed{42}.", "42"), ("\\boxed{1} then \\boxed{\\frac{1}{2}}", "\\frac{1}{2}"), ("\\boxed{}", None),
    ("\\boxed{42", None), ("42", None), ("<think>\\boxed{1}</think> \\boxed{2}", "2"), (None, None),
])  # fmt: skip
def test_extract_boxed(text, want):
    assert extract_boxed(text) == want


@pytest.mark.bwrap
async def test_math_equivalents_near_misses_and_timeouts():
    task = MathTask(MathConfig(check_timeout_s=3.0))
    cases = [("0.5", "\\frac{1}{2}", 1.0), ("\\frac{23}{131}", "23/131", 1.0), ("(x+1)^2", "x^2+2x+1", 1.0),
             ("\\{1,2\\}", "\\{2,1\\}", 1.0), ("1330", "1,330", 1.0), ("3", "3.01", 0.0), ("\\sqrt{2}", "1.414", 0.0),
             ("(1,2)", "(2,1)", 0.0), ("7", "9^{9^{9^{9^{9}}}}", 0.0)]  # fmt: skip
    try:
        for gold, pred, want in cases:
            out = await task.evaluate({"expected_answer": gold}, f"\\boxed{{{pred}}}")
            assert out.reward == want, (gold, pred, out)
            assert not out.mask_sample
        out = await task.evaluate({"expected_answer": "3"}, "no box here")
        assert out.reward == 0.0 and out.reason == "no_answer"
        # after a killed (timed-out) check the next one still works
        assert (await task.evaluate({"expected_answer": "0.25"}, "\\boxed{\\frac14}")).reward == 1.0
    finally:
        await task.aclose()


@pytest.mark.parametrize(("gold", "pred", "want"), [
    ("17/293", "17/293", True), ("17/293", "\\frac{17}{293}", True), ("17/293", "\\dfrac{17}{293}.", True),
    ("17/293", "34/586", False), ("17/293", "0.0580", False), ("5", "10/2", False), ("5", "5/1", True),
    ("17/293", "17/29", False), ("x+1", "1+x", False),
])  # fmt: skip
def test_exact_form_asks_for_the_gold_form_not_an_equal_value(gold, pred, want):
    assert exact_form_equal(gold, pred) is want


@pytest.mark.parametrize(("gold", "pred", "want"), [
    ("-354", "-354", True), ("1000", "+01,000.00", True), ("1000", "1,000.", True), ("1230.5885", "1230.5885", True),
    ("-354", "696 - 118 - 932", False), ("214", "57 + 87 + 70", False), ("6", "\\frac{12}{2}", False),
    ("-354", "-353", False), ("3", "x", False),
])  # fmt: skip
def test_a_number_answer_must_be_a_plain_number_of_that_value(gold, pred, want):
    assert plain_number_equal(gold, pred) is want


@pytest.fixture
async def math_task() -> AsyncIterator[MathTask]:
    task = MathTask(MathConfig(sandboxed_checker=False))
    try:
        yield task
    finally:
        await task.aclose()


def reasoning_gym_row(family: str, question: str, answer: str) -> dict:
    return math_row(reasoning_gym_problem(family, {"question": question, "answer": answer}, f"rg-{family}"))


async def test_a_row_that_asks_to_compute_a_sum_refuses_the_sum_restated(math_task: MathTask):
    row = reasoning_gym_row("chain_sum", "State the final answer: 57 + 87 + 70 =", "214")
    assert row["answer_match"] == "number"
    assert (await math_task.evaluate(row, "\\boxed{214}")).reward == 1.0
    assert (await math_task.evaluate(row, "\\boxed{57 + 87 + 70}")).reward == 0.0


async def test_a_row_that_asks_for_lowest_terms_refuses_an_unreduced_fraction(math_task: MathTask):
    row = reasoning_gym_row(
        "fraction_simplification", "Simplify the fraction 935/16115 to its lowest terms.", "17/293"
    )
    assert row["answer_match"] == "exact"
    assert (await math_task.evaluate(row, "\\boxed{\\frac{17}{293}}")).reward == 1.0
    unreduced = await math_task.evaluate(row, "\\boxed{935/16115}")
    assert unreduced.reward == 0.0 and unreduced.reason == "wrong_answer"
    # the same answer to a task that asks for a value is right
    assert (await math_task.evaluate({"expected_answer": "17/293"}, "\\boxed{935/16115}")).reward == 1.0
    bad = await math_task.evaluate({**row, "answer_match": "close_enough"}, "\\boxed{17/293}")
    assert bad.reward == 0.0 and bad.reason == "bad_row"


@pytest.mark.parametrize(("text", "want"), [
    ("Answer: (C)", "C"), ("the answer is c", "C"), ("\\boxed{B}", "B"), ("**Final Answer: D**", "D"),
    ("The answer is a bit unclear. Answer: B", "B"), ("I pick\n\n(A)", "A"), ("answer is E", None),
    ("Correct option: **C**", "C"), ("no idea", None), ("", None),
    ("D: Chromosome painting", "D"), ("(B) 4 m/s, since v = d/t", "B"), ("A. 10^-9 eV\n\nbecause", "A"),
    ("A more precise approach is needed", None), ("E: not an option", None),
])  # fmt: skip
def test_extract_choice(text, want):
    assert extract_choice(text, "ABCD")[0] == want


@pytest.mark.parametrize(("text", "value", "unit"), [
    ("10^-4 eV", 1e-4, "eV"), ("3.2 \\times 10^{-4} eV", 3.2e-4, "eV"), ("3.2\u00d710\u207b\u2074 eV", 3.2e-4, "eV"),
    ("1,200 m/s", 1200.0, "m/s"), ("-0.7", -0.7, None),
])  # fmt: skip
def test_parse_quantity(text, value, unit):
    got = parse_quantity(text)
    assert got is not None and got[0] == pytest.approx(value) and got[1] == unit


async def test_stem_numeric_units_and_tolerance():
    task, row = StemTask(), {"expected_answer": "10^-4 eV", "answer_type": "numeric", "rel_tol": 0.02}
    for text, want in [("\\boxed{0.1 meV}", 1.0), ("\\boxed{1.01e-4 eV}", 1.0), ("\\boxed{1e-4}", 1.0),
                       ("\\boxed{1e-4 J}", 0.0), ("\\boxed{1e-4 m}", 0.0), ("\\boxed{2e-4 eV}", 0.0),
                       ("\\boxed{lots}", 0.0), ("", 0.0)]:  # fmt: skip
        assert (await task.evaluate(row, text)).reward == want, text
