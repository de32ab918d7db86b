# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""STEM converters read each dataset's published schema (the records in
environments/<name>/data/upstream_sample.jsonl) into `prorl_stem` multiple-choice rows that the
STEM grader scores: the right letter 1, any other 0."""

from __future__ import annotations

from typing import Any

import pytest

from nemo_gym_prorl.assets import project_root
from nemo_gym_prorl.datasets.catalog import RecordError
from nemo_gym_prorl.datasets.converters.stem import GPQA_SHUFFLE_SEED, gpqa_order
from nemo_gym_prorl.datasets.environments import environment
from nemo_gym_prorl.datasets.rows import read_jsonl
from nemo_gym_prorl.tasks.stem import StemTask, extract_choice


def sample(name: str) -> list[dict[str, Any]]:
    return read_jsonl(project_root() / "environments" / name / "data" / "upstream_sample.jsonl")


def convert(name: str, record: dict[str, Any]) -> dict[str, Any]:
    return environment(name).rows(record, [], "prorl_agent")


def option(row: dict[str, Any], letter: str) -> str:
    return next(text for opt in row["options"] for k, text in opt.items() if k == letter)


# -- GPQA Diamond -----------------------------------------------------------------------------


def test_gpqa_options_are_shuffled_per_record_with_the_permutation_recorded() -> None:
    records = sample("gpqa_diamond")[:5]
    rows = [convert("gpqa_diamond", r) for r in records]
    assert len({r["expected_answer"] for r in rows}) > 1, "the correct answer is not always A"
    for record, row in zip(records, rows, strict=True):
        assert row["answer_type"] == "mc" and row["letters"] == "ABCD"
        assert row["shuffle_seed"] == GPQA_SHUFFLE_SEED
        assert row["option_order"] == gpqa_order(record["Record ID"], GPQA_SHUFFLE_SEED)
        assert option(row, row["expected_answer"]) == record["Correct Answer"].strip()
        columns = ["Correct Answer", "Incorrect Answer 1", "Incorrect Answer 2", "Incorrect Answer 3"]
        assert [text for opt in row["options"] for text in opt.values()] == [
            record[columns[k]].strip() for k in row["option_order"]
        ]
        user = row["responses_create_params"]["input"][1]["content"]
        assert user.startswith(record["Question"]) and f"\n\nA: {option(row, 'A')}\n" in user
    assert rows == [convert("gpqa_diamond", r) for r in records], "the same order on every run"
    # answers published with trailing whitespace are stripped
    assert "Two points, 25 ml and 35 ml" in {option(rows[2], k) for k in "ABCD"}


def test_gpqa_order_depends_on_the_record_and_the_seed() -> None:
    orders = {tuple(gpqa_order(f"rec{i:014d}")) for i in range(40)}
    assert len(orders) > 10 and all(sorted(o) == [0, 1, 2, 3] for o in orders)
    assert any(gpqa_order(f"rec{i}", 0) != gpqa_order(f"rec{i}", 1) for i in range(5))


def test_gpqa_record_with_a_missing_or_repeated_answer_is_refused() -> None:
    with pytest.raises(RecordError, match="without 'Incorrect Answer 3'"):
        convert("gpqa_diamond", sample("gpqa_diamond")[5])
    record = sample("gpqa_diamond")[1]
    with pytest.raises(RecordError, match="not distinct"):
        convert("gpqa_diamond", record | {"Incorrect Answer 2": record["Correct Answer"] + " \n"})


# -- MMLU-Pro ---------------------------------------------------------------------------------


def test_mmlu_pro_keeps_up_to_ten_options_and_drops_na_padding() -> None:
    rows = [convert("mmlu_pro", r) for r in sample("mmlu_pro")[:6]]
    assert [len(r["letters"]) for r in rows] == [9, 10, 10, 4, 6, 10]
    assert rows[0]["letters"] == "ABCDEFGHI"
    assert [r["expected_answer"] for r in rows] == ["I", "I", "B", "A", "B", "B"]
    assert option(rows[0], "I") == "Unsafe practices, Distress, Fear, Serious"
    assert rows[0]["task_id"] == "mmlu_pro-70" and rows[0]["category"] == "business"
    assert rows[1]["responses_create_params"]["input"][1]["content"].endswith("\nI: 72 m\nJ: 108 m")
    assert "N/A" not in rows[4]["responses_create_params"]["input"][1]["content"]


def test_mmlu_pro_answer_on_padding_or_disagreeing_with_its_index_is_refused() -> None:
    with pytest.raises(RecordError, match="answer_index 4 is not one of the 3 options"):
        convert("mmlu_pro", sample("mmlu_pro")[6])
    with pytest.raises(RecordError, match="answer 'C' disagrees with answer_index 1"):
        convert("mmlu_pro", sample("mmlu_pro")[2] | {"answer": "C"})
    with pytest.raises(RecordError, match="with 11 options"):
        convert("mmlu_pro", sample("mmlu_pro")[2] | {"options": [str(i) for i in range(11)]})


# -- grading ----------------------------------------------------------------------------------


async def test_converted_rows_grade_the_right_letter_one_and_others_zero() -> None:
    task = StemTask()
    gpqa = convert("gpqa_diamond", sample("gpqa_diamond")[0])
    mmlu = convert("mmlu_pro", sample("mmlu_pro")[0])
    wrong_gpqa = next(k for k in "ABCD" if k != gpqa["expected_answer"])
    assert (await task.evaluate(gpqa, f"Answer: {gpqa['expected_answer']}")).reward == 1.0
    assert (await task.evaluate(gpqa, f"Answer: {wrong_gpqa}")).reward == 0.0
    assert (await task.evaluate(mmlu, "The answer is (I).")).reward == 1.0
    assert (await task.evaluate(mmlu, "\\boxed{H}")).reward == 0.0
    out = await task.evaluate(mmlu, "Answer: J")  # J is not one of this row's nine options
    assert out.reward == 0.0 and out.reason == "no_answer"


@pytest.mark.parametrize(("text", "want"), [
    ("Answer: J", "J"), ("Answer: I", "I"), ("the answer is (I) because of the distress", "I"),
    ("Answer: I think it is F.", None), ("Answer: I think the answer is (G)", "G"), ("Answer: I\nsince B fails", "I"),
])  # fmt: skip
def test_letters_beyond_d_and_the_pronoun_i(text: str, want: str | None) -> None:
    assert extract_choice(text, "ABCDEFGHIJ")[0] == want
