# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""STEM datasets -> `prorl_stem` multiple-choice rows.

A row is what `tasks/stem.py` grades (the shape of `sources.stem_rows`): `answer_type` "mc",
`expected_answer` the correct letter, `options` a list of `{letter: text}`, `letters` the valid
letters (A-J for MMLU-Pro's ten options: the grader only accepts a letter of the row's options),
and the prompt lists the options as "A: text" under the question.
"""

from __future__ import annotations

import random
import string
from collections.abc import Mapping, Sequence
from typing import Any

from nemo_gym_prorl.datasets.catalog import DatasetEnvironment, RecordError, Tools
from nemo_gym_prorl.datasets.converters.math import text_field
from nemo_gym_prorl.datasets.rows import make_row
from nemo_gym_prorl.datasets.sources import STEM_MC_SYSTEM, _options_text

LETTERS = string.ascii_uppercase


def mc_row(
    task_id: str,
    question: str,
    options: Sequence[str],
    correct: int,
    tools: Tools,
    agent: str,
    source: str,
    **fields: Any,
) -> dict[str, Any]:
    """The row of one multiple-choice question whose `correct`-th option (0-based) is right."""
    labelled = [{LETTERS[i]: text} for i, text in enumerate(options)]
    return make_row(
        "prorl_stem", task_id, STEM_MC_SYSTEM, f"{question}\n\n{_options_text(labelled)}", tools, agent,
        answer_type="mc", expected_answer=LETTERS[correct], options=labelled,
        letters=LETTERS[: len(options)], source=source, **fields,
    )  # fmt: skip


# -- GPQA -------------------------------------------------------------------------------------

# GPQA publishes the correct answer and three distractors in separate columns; shown in that order
# the answer would always be A. Each row's order is a permutation seeded from this seed and the
# record's id, so it is stable across runs and machines (a str seed is hashed with SHA-512, not
# with Python's per-process hash) and recorded in the row.
GPQA_SHUFFLE_SEED = 0
GPQA_ANSWERS = ("Correct Answer", "Incorrect Answer 1", "Incorrect Answer 2", "Incorrect Answer 3")


def gpqa_order(record_id: str, seed: int = GPQA_SHUFFLE_SEED) -> list[int]:
    """Option i of the row shows GPQA answer `order[i]` (0: the correct one, k: Incorrect Answer k)."""
    order = list(range(len(GPQA_ANSWERS)))
    random.Random(f"gpqa:{seed}:{record_id}").shuffle(order)
    return order


def gpqa_answer(record: Mapping[str, Any], column: str) -> str:
    value = record.get(column)
    if not isinstance(value, str) or not value.strip():
        raise RecordError(f"GPQA record without {column!r}")
    return value.strip()  # the CSV's answers often end in a newline or a space


def gpqa_diamond(record: Mapping[str, Any], tools: Tools, agent: str) -> dict[str, Any]:
    question = text_field(record, "Question")
    record_id = text_field(record, "Record ID")
    answers = [gpqa_answer(record, column) for column in GPQA_ANSWERS]
    if len(set(answers)) < len(answers):
        raise RecordError("GPQA options are not distinct: two would be equally right")
    order = gpqa_order(record_id)
    return mc_row(
        f"gpqa_diamond-{record_id}", question, [answers[k] for k in order], order.index(0), tools, agent,
        "Idavidrein/gpqa (gpqa_diamond)", record_id=record_id, shuffle_seed=GPQA_SHUFFLE_SEED,
        option_order=order, domain=record.get("High-level domain"), subdomain=record.get("Subdomain"),
    )  # fmt: skip


# -- MMLU-Pro ---------------------------------------------------------------------------------

MMLU_PRO_MAX_OPTIONS = 10
MMLU_PRO_PADDING = "N/A"  # earlier releases padded short option lists to ten with "N/A"


def mmlu_pro_options(options: Any) -> list[str]:
    """The real options of a record: up to ten, trailing "N/A" padding dropped (as TIGER-Lab's
    evaluate_from_api.py does), order and so letters kept."""
    if not isinstance(options, list) or not all(isinstance(o, str) for o in options):
        raise RecordError("MMLU-Pro options are not a list of strings")
    real = [o.strip() for o in options]
    while real and real[-1] == MMLU_PRO_PADDING:
        real.pop()
    if not 2 <= len(real) <= MMLU_PRO_MAX_OPTIONS:
        raise RecordError(f"MMLU-Pro record with {len(real)} options")
    if not all(real):
        raise RecordError("MMLU-Pro record with an empty option")
    return real


def mmlu_pro(record: Mapping[str, Any], tools: Tools, agent: str) -> dict[str, Any]:
    question = text_field(record, "question")
    question_id = text_field(record, "question_id")
    options = mmlu_pro_options(record.get("options"))
    index, answer = record.get("answer_index"), record.get("answer")
    if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < len(options):
        raise RecordError(f"MMLU-Pro answer_index {index!r} is not one of the {len(options)} options")
    if answer != LETTERS[index]:
        raise RecordError(f"MMLU-Pro answer {answer!r} disagrees with answer_index {index}")
    return mc_row(
        f"mmlu_pro-{question_id}", question, options, index, tools, agent, "TIGER-Lab/MMLU-Pro",
        category=record.get("category"), src=record.get("src"),
    )  # fmt: skip


ENVIRONMENTS: tuple[DatasetEnvironment, ...] = (
    DatasetEnvironment(
        name="gpqa_diamond",
        title="GPQA Diamond",
        domain="stem",
        hub_id="Idavidrein/gpqa",
        hub_subset="gpqa_diamond",
        train_splits=("train",),
        published_rows="198 train (config gpqa_diamond; gpqa_main 448, gpqa_extended 546)",
        license="CC BY 4.0",
        gym_license="Creative Commons Attribution 4.0 International",
        schema_source="https://huggingface.co/datasets/Idavidrein/gpqa at 633f5ee89ab8ad4522a9f850766b73f62147ffdd "
        "(gpqa_diamond.csv: Question, Correct Answer, Incorrect Answer 1-3, Record ID, High-level domain, "
        "Subdomain, the pre-revision and validator columns), the CSV of https://github.com/idavidrein/gpqa",
        needs="Hugging Face access to the gated Idavidrein/gpqa (accept its terms, then HF_TOKEN or "
        "`huggingface-cli login`)",
        max_turns=4,
        convert=gpqa_diamond,
    ),
    DatasetEnvironment(
        name="mmlu_pro",
        title="MMLU-Pro",
        domain="stem",
        hub_id="TIGER-Lab/MMLU-Pro",
        train_splits=("test",),
        validation_split="validation",
        published_rows="12,032 test, 70 validation",
        license="MIT",
        gym_license="MIT",
        schema_source="https://huggingface.co/datasets/TIGER-Lab/MMLU-Pro as published since 2024-09 (12,032 test; "
        "config `default`: question_id, question, "
        "options (up to ten), answer letter, answer_index, cot_content, category, src); option handling as in "
        "https://github.com/TIGER-AI-Lab/MMLU-Pro evaluate_from_api.py (`N/A` options dropped)",
        max_turns=4,
        convert=mmlu_pro,
    ),
)
