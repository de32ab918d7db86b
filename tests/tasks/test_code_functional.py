# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The functional test style (LeetCode-style LiveCodeBench, call-based APPS/TACO): each test calls
`Solution().<fn>(*args)` or `<fn>(*args)` in its own process and compares the return value; and
the function style's whole-program completions (MBPP: no prompt to complete)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from nemo_gym_prorl.tasks.code import CodeConfig, CodeTask, function_program, returned_value_matches


def functional_row(fn_name: str, calls: list[tuple[list[Any], Any]], match: str = "exact") -> dict[str, Any]:
    return {"verifier_metadata": {"style": "functional", "fn_name": fn_name, "match": match, "unit_tests": {
        "inputs": [json.dumps(args) for args, _ in calls], "outputs": [json.dumps(out) for _, out in calls]}}}  # fmt: skip


def reply(code: str) -> str:
    return f"```python\n{code}```"


def test_returned_value_is_read_after_the_marker_only() -> None:
    assert returned_value_matches("noise\n@@m@@[1, 2]\n", "@@m@@", "[1, 2]", "exact")
    assert not returned_value_matches("[1, 2]\n", "@@m@@", "[1, 2]", "exact")  # printed, not returned
    assert not returned_value_matches("@@m@@[1]\n", "@@m@@", "[[1]]", "exact")
    assert returned_value_matches("@@m@@[1]\n", "@@m@@", "[[1]]", "apps")  # APPS wraps outputs
    assert returned_value_matches("@@m@@true\n", "@@m@@", "1", "exact")  # Python equality, as the harnesses
    assert not returned_value_matches("@@m@@not json\n", "@@m@@", "1", "exact")


def test_function_program_without_prompt_runs_the_completion_as_is() -> None:
    program = function_program(
        "", "def add(a, b):\n    return a + b\n", "def check(candidate):\n    pass\n", "add"
    )
    assert program.startswith("def add(a, b):") and program.endswith("check(add)\n")


@pytest.fixture
async def task():
    code_task = CodeTask(CodeConfig(runners=2, timeout_s=5))
    yield code_task
    await code_task.aclose()


@pytest.mark.bwrap
async def test_solution_method_called_with_json_arguments(task: CodeTask) -> None:
    row = functional_row("twoSum", [([[2, 7, 11, 15], 9], [0, 1]), ([[3, 2, 4], 6], [1, 2])])
    code = ("class Solution:\n    def twoSum(self, nums: List[int], target: int) -> List[int]:\n"  # List: prelude
            "        print('debugging output is fine')\n        seen = {}\n"
            "        for i, x in enumerate(nums):\n            if target - x in seen:\n"
            "                return (seen[target - x], i)\n            seen[x] = i\n")  # fmt: skip
    outcome = await task.evaluate(row, reply(code))
    assert outcome.reward == 1.0, outcome  # a tuple counts as the expected list
    assert outcome.report["style"] == "functional" and outcome.report["tests_passed"] == 2


@pytest.mark.bwrap
async def test_top_level_function_apps_matching_and_int_keys(task: CodeTask) -> None:
    row = functional_row("add_binary", [([1, 1], ["10"]), ([2, 2], ["100"])], match="apps")
    assert (
        await task.evaluate(row, reply("def add_binary(a, b):\n    return bin(a + b)[2:]\n"))
    ).reward == 1.0
    exact = functional_row("add_binary", [([1, 1], ["10"])])
    assert (
        await task.evaluate(exact, reply("def add_binary(a, b):\n    return bin(a + b)[2:]\n"))
    ).reward == 0.0
    keys = functional_row("keys", [([{"1": "a", "2": "b"}], [[1, 2]])], match="apps")
    assert (await task.evaluate(keys, reply("def keys(d):\n    return sorted(d)\n"))).reward == 1.0


@pytest.mark.bwrap
async def test_wrong_values_errors_and_forged_output_fail_each_test_alone(task: CodeTask) -> None:
    row = functional_row("half", [([4], 2), ([6], 3), ([0], 0)])
    code = "def half(n):\n    if n == 6:\n        raise ValueError('no')\n    return n // 2 if n else 1\n"
    outcome = await task.evaluate(row, reply(code))
    assert outcome.report["tests_passed"] == 1 and outcome.reward == pytest.approx(0.3 / 3)
    forged = (
        "import sys\nprint('@@prorl-return-0000000000000000@@2')\nsys.exit(0)\ndef half(n):\n    return 0\n"
    )
    assert (await task.evaluate(row, reply(forged))).reward == 0.0
    missing = await task.evaluate(row, reply("def other(n):\n    return n // 2\n"))
    assert missing.reward == 0.0


@pytest.mark.bwrap
async def test_row_without_function_name_is_a_bad_row(task: CodeTask) -> None:
    row = functional_row("x", [([1], 1)])
    del row["verifier_metadata"]["fn_name"]
    outcome = await task.evaluate(row, reply("def x(a):\n    return a\n"))
    assert outcome.reward == 0.0 and outcome.reason == "bad_row"


@pytest.mark.bwrap
async def test_function_style_without_prompt_grades_the_whole_completion(task: CodeTask) -> None:
    row = {"verifier_metadata": {"style": "function", "prompt": "", "entry_point": "add",
                                 "test": "def check(candidate):\n    assert add(2, 3) == 5\n"}}  # fmt: skip
    assert (
        await task.evaluate(row, reply("import operator\ndef add(a, b):\n    return operator.add(a, b)\n"))
    ).reward == 1.0
    assert (await task.evaluate(row, reply("def add(a, b):\n    return a - b\n"))).reward == 0.0
