# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Math datasets -> `prorl_math` rows (IPython tool, `\\boxed{}` answers, math-verify grading)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nemo_gym_prorl.datasets.catalog import DatasetEnvironment, RecordError, Tools, content_id
from nemo_gym_prorl.datasets.sources import math_row


def text_field(record: Mapping[str, Any], *names: str) -> str:
    """The first of `names` that holds non-empty text (datasets spell their fields differently)."""
    for name in names:
        value = record.get(name)
        if isinstance(value, (str, int, float)) and str(value).strip():
            return str(value).strip()
    raise RecordError(f"no {' / '.join(names)} field")


def gsm8k_answer(solution: str) -> str:
    """The final answer of a GSM8K solution: what follows `#### `, thousands separators removed."""
    if "####" not in solution:
        raise RecordError("GSM8K answer without '#### '")
    answer = solution.rsplit("####", 1)[1].strip().replace(",", "")
    if not answer:
        raise RecordError("GSM8K answer empty after '#### '")
    return answer


def gsm8k(record: Mapping[str, Any], tools: Tools, agent: str) -> dict[str, Any]:
    question = text_field(record, "question")
    problem = {"source": "openai/gsm8k", "id": f"gsm8k-{content_id(question)}",
               "problem": question, "answer": gsm8k_answer(text_field(record, "answer"))}  # fmt: skip
    return math_row(problem, agent, tools)


ENVIRONMENTS: tuple[DatasetEnvironment, ...] = (
    DatasetEnvironment(
        name="gsm8k",
        title="GSM8K",
        domain="math",
        hub_id="openai/gsm8k",
        hub_subset="main",
        train_splits=("train",),
        validation_split="test",
        published_rows="7,473 train, 1,319 test",
        license="MIT",
        gym_license="MIT",
        schema_source="https://huggingface.co/datasets/openai/gsm8k (config `main`: question, answer with "
        "`#### <number>`), as published since 2021",
        max_turns=4,
        convert=gsm8k,
    ),
)
