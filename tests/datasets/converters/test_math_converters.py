# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Math converters read each dataset's published schema (the records in
environments/<name>/data/upstream_sample.jsonl) into `prorl_math` rows with gradeable answers."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from nemo_gym_prorl.assets import project_root
from nemo_gym_prorl.datasets.catalog import RecordError
from nemo_gym_prorl.datasets.converters.math import boxed_answer
from nemo_gym_prorl.datasets.environments import environment
from nemo_gym_prorl.datasets.prepare import convert_records
from nemo_gym_prorl.datasets.rows import read_jsonl
from nemo_gym_prorl.datasets.sources import MATH_SYSTEM
from nemo_gym_prorl.tasks.math import MathConfig, MathTask


def sample(name: str) -> list[dict[str, Any]]:
    return read_jsonl(project_root() / "environments" / name / "data" / "upstream_sample.jsonl")


def convert(name: str, record: dict[str, Any]) -> dict[str, Any]:
    return environment(name).rows(record, [], "prorl_agent")


def test_gsm8k_answer_is_the_number_after_the_marks_without_separators() -> None:
    rows = [convert("gsm8k", r) for r in sample("gsm8k")[:4]]
    assert [r["expected_answer"] for r in rows] == ["72", "10", "2250000", "8"]
    assert rows[0]["responses_create_params"]["input"][1]["content"].startswith("Natalia sold clips")
    assert "####" not in rows[0]["responses_create_params"]["input"][1]["content"]


def test_gsm8k_record_without_final_answer_is_refused() -> None:
    with pytest.raises(RecordError, match="without '#### '"):
        convert("gsm8k", sample("gsm8k")[4])


# -- DAPO-Math-17k ----------------------------------------------------------------------------


def test_dapo_row_is_the_bare_problem_without_dapos_answer_line_instructions() -> None:
    records = sample("dapo_math_17k")
    row = convert("dapo_math_17k", records[0])
    user = row["responses_create_params"]["input"][1]["content"]
    assert user.startswith("In triangle $ABC$") and user.endswith("find $a + b + c$.")
    assert "Solve the following" not in user and "Remember to put" not in user
    assert row["responses_create_params"]["input"][0]["content"] == MATH_SYSTEM
    assert row["expected_answer"] == "34"
    assert row["source_index"] == "9a9b6eb4-a1cb-49d1-8c1e-62eaf2f74079"


def test_dapo_repeats_share_a_task_id_and_prepare_keeps_one_row_per_problem() -> None:
    records = sample("dapo_math_17k")
    ids = [convert("dapo_math_17k", r)["task_id"] for r in records[:7]]
    assert ids[0] == ids[2], "the same row published again"
    assert ids[1] == ids[5], "the same problem under another extra_info.index"
    skipped: Counter[str] = Counter()
    rows = convert_records(environment("dapo_math_17k"), records, "prorl_agent", skipped)
    assert [r["expected_answer"] for r in rows] == ["34", "-3", "2015", "8", "108"]
    assert skipped == {"duplicate of an earlier record (same task_id)": 2,
                       "DAPO record without reward_model.ground_truth": 1}  # fmt: skip


def test_dapo_record_without_a_user_message_is_refused() -> None:
    record = sample("dapo_math_17k")[0] | {"prompt": [{"content": "hi", "role": "system"}]}
    with pytest.raises(RecordError, match="no user message"):
        convert("dapo_math_17k", record)
    with pytest.raises(RecordError, match="not a message list"):
        convert("dapo_math_17k", sample("dapo_math_17k")[0] | {"prompt": "Solve x."})


# -- MATH and MATH-500 ------------------------------------------------------------------------


def test_math_answer_is_the_last_boxed_of_the_solution_in_every_published_form() -> None:
    rows = [convert("math", r) for r in sample("math")[:6]]
    # nested braces, \boxed 5 without braces, \fbox
    assert [r["expected_answer"] for r in rows] == ["2", "\\sqrt{2}", "(3, -1)", "\\frac{8-7x}{6}", "7", "5"]
    assert [r["level"] for r in rows][-1] == "Level ?" and rows[0]["subject"] == "Algebra"
    assert boxed_answer("first $\\boxed{1}$, corrected: $\\boxed{\\frac{1}{2}}$.") == "\\frac{1}{2}"
    assert boxed_answer("so it is $\\boxed 12.$") == "12"


def test_math_solution_without_boxed_answer_is_refused() -> None:
    with pytest.raises(RecordError, match="without a \\\\boxed"):
        convert("math", sample("math")[6])


def test_math_500_uses_its_answer_field_and_its_unique_id() -> None:
    rows = [convert("math_500", r) for r in sample("math_500")[:5]]
    assert rows[0]["task_id"] == "math_500-precalculus-807"
    assert rows[0]["unique_id"] == "test/precalculus/807.json" and rows[0]["level"] == 2
    assert [r["expected_answer"] for r in rows] == [
        "\\left( 3, \\frac{\\pi}{2} \\right)", "p - q", "\\frac{14}{3}", "9", "26000"]  # fmt: skip
    with pytest.raises(RecordError, match="no answer field"):
        convert("math_500", sample("math_500")[5])


# -- AIME -------------------------------------------------------------------------------------


def test_aime_answers_are_integers_without_zero_padding() -> None:
    rows = [convert("aime", r) for r in sample("aime")[:5]]
    assert [r["expected_answer"] for r in rows] == ["116", "191", "204", "25", "809"]
    assert rows[3]["url"].endswith("2024_AIME_I_Problems/Problem_2")
    assert rows[0]["source"] == "AI-MO/aimo-validation-aime"


@pytest.mark.parametrize("answer", ["\\frac{1}{115}", "1000", "-3", "", True])
def test_aime_answer_outside_0_to_999_is_refused(answer: Any) -> None:
    with pytest.raises(RecordError, match="not an integer 0-999"):
        convert("aime", sample("aime")[0] | {"answer": answer})


def test_aime_converts_matharena_records_too() -> None:
    record = {"problem_idx": 1, "problem": "Find the sum of all integer bases $b>9$ for which $17_b$ is a "
              "divisor of $97_b$.", "answer": 70}  # fmt: skip
    row = convert("aime", record)
    assert row["expected_answer"] == "70" and row["source"] == "MathArena"


# -- the rows grade as the math task grades them ----------------------------------------------


@pytest.mark.bwrap
async def test_converted_rows_grade_one_for_the_gold_answer_and_zero_otherwise() -> None:
    task = MathTask(MathConfig(check_timeout_s=10.0))
    cases = [
        (convert("aime", sample("aime")[3]), "so $xy = \\boxed{25}$", "\\boxed{24}"),
        (convert("dapo_math_17k", sample("dapo_math_17k")[1]), "\\boxed{-3}", "\\boxed{3}"),
        (convert("math_500", sample("math_500")[0]), "\\boxed{(3, \\frac{\\pi}{2})}", "\\boxed{(3, \\pi)}"),
        # an equivalent form that only math-verify recognises
        (convert("math", sample("math")[3]), "\\boxed{\\frac{-7x+8}{6}}", "\\boxed{\\frac{8+7x}{6}}"),
    ]
    try:
        for row, right, wrong in cases:
            assert (await task.evaluate(row, right)).reward == 1.0, (row["task_id"], right)
            assert (await task.evaluate(row, wrong)).reward == 0.0, (row["task_id"], wrong)
    finally:
        await task.aclose()
