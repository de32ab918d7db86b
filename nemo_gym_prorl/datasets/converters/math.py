# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Math datasets -> `prorl_math` rows (IPython tool, `\\boxed{}` answers, math-verify grading).

Every row carries the bare problem under this project's math system prompt (`sources.MATH_SYSTEM`:
answer in `\\boxed{}`) and its gold answer in `expected_answer`, which `tasks/math.py` compares
with math-verify; a dataset's own answer-format instructions are removed so the two never conflict.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from nemo_gym_prorl.datasets.catalog import DatasetEnvironment, RecordError, Tools, content_id
from nemo_gym_prorl.datasets.sources import math_row
from nemo_gym_prorl.tasks.math import extract_boxed


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


# -- DAPO-Math-17k ----------------------------------------------------------------------------

# DAPO wraps every problem in the same instruction (answer on an "Answer:" line); this project asks
# for `\boxed{}` in its system prompt instead, so the row carries the problem alone.
DAPO_PREFIX = (
    "Solve the following math problem step by step. The last line of your response should be of "
    "the form Answer: $Answer (without quotes) where $Answer is the answer to the problem.\n\n"
)
DAPO_SUFFIX = '\n\nRemember to put your answer on its own line after "Answer:".'


def dapo_problem(prompt: Any) -> str:
    """The bare problem of DAPO's `prompt` (a chat message list): the user message without DAPO's
    instruction prefix and reminder suffix."""
    if not isinstance(prompt, list):
        raise RecordError("DAPO prompt is not a message list")
    users = [m.get("content") for m in prompt if isinstance(m, Mapping) and m.get("role") == "user"]
    if not users or not isinstance(users[-1], str) or not users[-1].strip():
        raise RecordError("DAPO prompt has no user message")
    text = users[-1].strip()
    text = text.removeprefix(DAPO_PREFIX.strip()).strip()
    text = text.removesuffix(DAPO_SUFFIX.strip()).strip()
    if not text:
        raise RecordError("DAPO prompt is only the instructions")
    return text


def dapo_math_17k(record: Mapping[str, Any], tools: Tools, agent: str) -> dict[str, Any]:
    problem = dapo_problem(record.get("prompt"))
    reward_model = record.get("reward_model")
    answer = reward_model.get("ground_truth") if isinstance(reward_model, Mapping) else None
    if not isinstance(answer, str) or not answer.strip():
        raise RecordError("DAPO record without reward_model.ground_truth")
    answer = answer.strip()
    # The published file repeats each problem ~100 times, sometimes under a new extra_info.index:
    # the task id comes from the problem text, so `prepare` keeps its first copy only.
    extra = record.get("extra_info")
    index = extra.get("index") if isinstance(extra, Mapping) else None
    row_problem = {"source": "BytedTsinghua-SIA/DAPO-Math-17k", "id": f"dapo-{content_id(problem)}",
                   "problem": problem, "answer": answer}  # fmt: skip
    return math_row(row_problem, agent, tools, source_index=None if index is None else str(index))


# -- MATH (Hendrycks et al.) and MATH-500 -----------------------------------------------------


def boxed_answer(solution: str) -> str:
    """The final answer of a MATH solution: its last `\\boxed{...}` / `\\fbox{...}` (braces nested)
    or `\\boxed 5`, read as `tasks.math.extract_boxed` reads the policy's answer."""
    answer = extract_boxed(solution)
    # `\boxed 5.` (no braces) takes the sentence's full stop with it
    answer = answer.rstrip(".").strip() if answer else None
    if not answer:
        raise RecordError("MATH solution without a \\boxed{} answer")
    return answer


def hendrycks_math(record: Mapping[str, Any], tools: Tools, agent: str) -> dict[str, Any]:
    problem = text_field(record, "problem")
    answer = boxed_answer(text_field(record, "solution"))
    row_problem = {"source": "DigitalLearningGmbH/MATH-lighteval", "id": f"math-{content_id(problem)}",
                   "problem": problem, "answer": answer}  # fmt: skip
    # `level` is a string as published ("Level 3", a few "Level ?"), `type` the subject
    return math_row(row_problem, agent, tools, level=record.get("level"), subject=record.get("type"))


def math_500(record: Mapping[str, Any], tools: Tools, agent: str) -> dict[str, Any]:
    problem = text_field(record, "problem")
    unique_id = text_field(record, "unique_id")  # "test/precalculus/807.json": MATH's own file
    task_id = "math_500-" + re.sub(r"\.json$", "", unique_id.removeprefix("test/")).replace("/", "-")
    row_problem = {"source": "HuggingFaceH4/MATH-500", "id": task_id, "problem": problem,
                   "answer": text_field(record, "answer")}  # fmt: skip
    return math_row(row_problem, agent, tools, unique_id=unique_id, level=record.get("level"),
                    subject=record.get("subject"))  # fmt: skip


# -- AIME -------------------------------------------------------------------------------------


def aime_answer(value: Any) -> str:
    """An AIME answer, an integer 0-999 (published as a string, sometimes zero-padded: "033")."""
    text = str(value).strip() if isinstance(value, (str, int)) and not isinstance(value, bool) else ""
    if not re.fullmatch(r"\d{1,3}", text):
        raise RecordError(f"AIME answer {value!r} is not an integer 0-999")
    return str(int(text))


def aime(record: Mapping[str, Any], tools: Tools, agent: str) -> dict[str, Any]:
    """AI-MO/aimo-validation-aime (id, problem, solution, answer, url); MathArena/aime_2025's
    records (problem_idx, problem, answer as int64) convert as well (`--source MathArena/aime_2025`)."""
    problem = text_field(record, "problem")
    if "answer" not in record:
        raise RecordError("no answer field")
    source = "MathArena" if "problem_idx" in record else "AI-MO/aimo-validation-aime"
    row_problem = {"source": source, "id": f"aime-{content_id(problem)}", "problem": problem,
                   "answer": aime_answer(record["answer"])}  # fmt: skip
    return math_row(row_problem, agent, tools, url=record.get("url"))


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
    DatasetEnvironment(
        name="dapo_math_17k",
        title="DAPO-Math-17k",
        domain="math",
        hub_id="BytedTsinghua-SIA/DAPO-Math-17k",
        train_splits=("train",),
        published_rows="1,791,700 train: about 17.4k distinct problems, each repeated ~100 times "
        "(prepare keeps one row per problem)",
        license="Apache-2.0",
        gym_license="Apache 2.0",
        schema_source="https://huggingface.co/datasets/BytedTsinghua-SIA/DAPO-Math-17k (data/dapo-math-17k.parquet: "
        "data_source, prompt [{content, role}], ability, reward_model {ground_truth, style}, extra_info {index}); "
        "the duplication: https://github.com/BytedTsinghua-SIA/DAPO/issues/36",
        needs="a ~300 MB download (the 1.79M published rows) on the first prepare",
        max_turns=8,
        convert=dapo_math_17k,
    ),
    DatasetEnvironment(
        name="math",
        title="MATH",
        domain="math",
        hub_id="DigitalLearningGmbH/MATH-lighteval",
        hub_subset="default",
        train_splits=("train",),
        validation_split="test",
        published_rows="7,500 train, 5,000 test",
        license="MIT (the MATH release of Hendrycks et al.)",
        gym_license="MIT",
        schema_source="https://huggingface.co/datasets/DigitalLearningGmbH/MATH-lighteval at "
        "0530c78699ea5e8eb5530600900e1f328b48acad (config `default`: problem, level, type, solution with the "
        "answer in its last \\boxed{}), the MATH release of Hendrycks et al. (2021) in one config",
        max_turns=6,
        convert=hendrycks_math,
    ),
    DatasetEnvironment(
        name="math_500",
        title="MATH-500",
        domain="math",
        hub_id="HuggingFaceH4/MATH-500",
        train_splits=("test",),
        published_rows="500 test",
        license="MIT (openai/prm800k's MATH split; the Hub card names none)",
        gym_license="MIT",
        schema_source="https://huggingface.co/datasets/HuggingFaceH4/MATH-500 at ff5b20257d8185524591543f8ff5993951537bb8 "
        "(test.jsonl: problem, solution, answer, subject, level int, unique_id)",
        max_turns=6,
        convert=math_500,
    ),
    DatasetEnvironment(
        name="aime",
        title="AIME 2022-2024",
        domain="math",
        hub_id="AI-MO/aimo-validation-aime",
        train_splits=("train",),
        published_rows="90 train (AIME 2022, 2023 and 2024, I and II)",
        license="Apache-2.0",
        gym_license="Apache 2.0",
        schema_source="https://huggingface.co/datasets/AI-MO/aimo-validation-aime at "
        "8c6be017548b0fe2eb9fdf2239fca99700b9bccf (id int64, problem, solution, answer string, url)",
        max_turns=8,
        convert=aime,
    ),
)
