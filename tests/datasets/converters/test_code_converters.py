# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Code converters read each dataset's published schema (the records in
environments/<name>/data/upstream_sample.jsonl) into `prorl_code` rows whose tests the code
grader runs: the reference solutions score 1, wrong ones 0."""

from __future__ import annotations

import asyncio
import base64
import json
import pickle
import zlib
from typing import Any

import pytest

from nemo_gym_prorl.assets import project_root
from nemo_gym_prorl.datasets.catalog import RecordError
from nemo_gym_prorl.datasets.converters.code import lcb_private_tests, mbpp_entry_point
from nemo_gym_prorl.datasets.environments import environment
from nemo_gym_prorl.datasets.rows import read_jsonl
from nemo_gym_prorl.tasks.code import CodeConfig, CodeTask


def sample(name: str) -> list[dict[str, Any]]:
    return read_jsonl(project_root() / "environments" / name / "data" / "upstream_sample.jsonl")


def convert(name: str, record: dict[str, Any]) -> dict[str, Any]:
    return environment(name).rows(record, [], "prorl_agent")


def user_text(row: dict[str, Any]) -> str:
    return row["responses_create_params"]["input"][1]["content"]


def reply(code: str) -> str:
    return f"Here it is.\n```python\n{code}\n```"


# -- HumanEval / HumanEval+ ------------------------------------------------------------------------


def test_humaneval_rows_are_function_style_with_the_published_test() -> None:
    records = sample("humaneval")
    rows = [convert("humaneval", r) for r in records[:4]]
    assert [r["task_id"] for r in rows] == ["HumanEval/0", "HumanEval/2", "HumanEval/4", "HumanEval/16"]
    meta = rows[0]["verifier_metadata"]
    assert meta == {"style": "function", "prompt": records[0]["prompt"], "entry_point": "has_close_elements",
                    "test": records[0]["test"]}  # fmt: skip
    assert records[0]["prompt"] in user_text(rows[0]) and "canonical_solution" not in json.dumps(rows[0])
    assert all(r["data_source"] == "prorl_code" and r["dataset"] == "humaneval" for r in rows)


def test_humaneval_record_without_test_is_refused() -> None:
    with pytest.raises(RecordError, match="no test field"):
        convert("humaneval", sample("humaneval")[4])


def test_humaneval_plus_keeps_evalplus_test_and_gives_it_more_time() -> None:
    records = sample("humaneval_plus")
    row = convert("humaneval_plus", records[0])
    assert row["task_id"] == "HumanEvalPlus/0"
    assert row["verifier_metadata"]["test"] == records[0]["test"]
    assert "import numpy as np" in row["verifier_metadata"]["test"]
    assert row["verifier_metadata"]["timeout_s"] == 30.0
    with pytest.raises(RecordError, match=r"defines no check\(candidate\)"):
        convert("humaneval_plus", records[4])


# -- MBPP / MBPP+ ---------------------------------------------------------------------------------


def test_mbpp_entry_point_is_the_called_function_the_reference_defines() -> None:
    code = "import math\ndef is_prime(n):\n  return n > 1\ndef count_primes(nums):\n  return 0"
    assert mbpp_entry_point(code, ["assert count_primes([2, 3]) == 2"]) == "count_primes"
    assert mbpp_entry_point("def f(a):\n  return a", ["assert set(f((1, 2))) == set((2, 1))"]) == "f"
    assert mbpp_entry_point("def g(r):\n  return r", ["assert math.isclose(g(1), 1.0)"]) == "g"
    with pytest.raises(RecordError, match="call no function"):
        mbpp_entry_point("def max_of_nth(t, n): pass", ["assert max_of_nth_column([(1,)], 0) == 1"])


def test_mbpp_full_and_sanitized_records_become_check_functions() -> None:
    records = sample("mbpp")
    rows = {r["task_id"]: r for r in (convert("mbpp", rec) for rec in records[:5])}
    assert list(rows) == ["mbpp/11", "mbpp/17", "mbpp/605", "mbpp/2", "mbpp/139"]
    # full: the challenge tests are graded too, but only test_list is shown
    meta = rows["mbpp/11"]["verifier_metadata"]
    assert meta["prompt"] == "" and meta["entry_point"] == "remove_Occ"
    assert 'remove_Occ("hellolloll","l")' in meta["test"] and "hellolloll" not in user_text(rows["mbpp/11"])
    assert meta["test"].startswith("def check(candidate):\n    assert remove_Occ(")
    # full: test_setup_code runs before the asserts; the helper defined first is not the entry point
    meta = rows["mbpp/605"]["verifier_metadata"]
    assert meta["entry_point"] == "count_primes" and meta["test"].startswith(
        "sample_nums = [2, 3, 4, 5, 7, 9]\n"
    )
    # sanitized: `prompt` is the task, test_imports are the setup
    assert user_text(rows["mbpp/139"]).startswith("Write a function to find the circumference of a circle.")
    assert rows["mbpp/139"]["verifier_metadata"]["test"].startswith("import math\n\n\ndef check(candidate):")
    assert rows["mbpp/2"]["verifier_metadata"]["entry_point"] == "similar_elements"


def test_mbpp_record_whose_asserts_call_an_undefined_function_is_refused() -> None:
    with pytest.raises(RecordError, match="call no function the reference code defines"):
        convert("mbpp", sample("mbpp")[5])


def test_mbpp_plus_runs_evalplus_module_level_assertions() -> None:
    records = sample("mbpp_plus")
    row = convert("mbpp_plus", records[0])
    meta = row["verifier_metadata"]
    assert row["task_id"] == "mbppplus/2" and meta["entry_point"] == "similar_elements"
    assert meta["test"].startswith(records[0]["test"].rstrip())
    assert meta["test"].endswith("def check(candidate):\n    return None\n") and meta["timeout_s"] == 30.0
    assert "assert set(similar_elements((3, 4, 5, 6),(5, 7, 4, 10)))" in user_text(row)
    with pytest.raises(RecordError, match="without test_list"):
        convert("mbpp_plus", records[4])


# -- LiveCodeBench ------------------------------------------------------------------------------------


def test_lcb_private_tests_decode_json_or_base64_zlib_pickle() -> None:
    tests = [{"input": "1\n", "output": "2\n", "testtype": "stdin"}]
    encoded = base64.b64encode(zlib.compress(pickle.dumps(json.dumps(tests)))).decode()
    assert lcb_private_tests(encoded) == tests
    assert lcb_private_tests(json.dumps(tests)) == tests
    assert lcb_private_tests("") == []
    not_a_str = base64.b64encode(zlib.compress(pickle.dumps([1, 2]))).decode()
    with pytest.raises(RecordError, match="holds a list, not a str"):
        lcb_private_tests(not_a_str)


def test_lcb_pickle_naming_a_global_is_refused_without_running_it(tmp_path: Any) -> None:
    marker = tmp_path / "ran"
    payload = f"cbuiltins\nopen\n(S'{marker}'\nS'w'\ntR.".encode()
    with pytest.raises(RecordError, match=r"refers to builtins\.open; only a str is expected"):
        lcb_private_tests(base64.b64encode(zlib.compress(payload)).decode())
    assert not marker.exists()
    with pytest.raises(RecordError, match=r"refers to os\.system"):
        convert("livecodebench", sample("livecodebench")[5])


def test_lcb_functional_problem_calls_the_metadata_function_with_json_arguments() -> None:
    row = convert("livecodebench", sample("livecodebench")[1])
    meta = row["verifier_metadata"]
    assert row["task_id"] == "lcb/3093" and meta["style"] == "functional" and meta["match"] == "exact"
    assert meta["fn_name"] == "sumIndicesWithKSetBits"
    # public tests first, then the decoded private ones; one JSON array of arguments per test
    assert meta["unit_tests"]["inputs"][:2] == ["[[5, 10, 1, 5, 2], 1]", "[[4, 3, 2, 1], 2]"]
    assert meta["unit_tests"]["outputs"][:2] == ["13", "1"] and len(meta["unit_tests"]["inputs"]) == 5
    assert "class Solution:\n    def sumIndicesWithKSetBits" in user_text(row)
    assert user_text(row).startswith("### sum-of-values-at-indices-with-k-set-bits\n\n")


def test_lcb_stdin_problem_is_stdio_style_with_public_and_private_tests() -> None:
    records = sample("livecodebench")
    atcoder, codeforces = convert("livecodebench", records[2]), convert("livecodebench", records[3])
    assert atcoder["verifier_metadata"]["style"] == "stdio"
    assert atcoder["verifier_metadata"]["unit_tests"]["inputs"] == ["4\n", "1\n", "2\n", "10\n", "100\n"]
    assert codeforces["verifier_metadata"]["unit_tests"]["outputs"][1] == "First\nSecond\nFirst\n"
    assert "standard input" in user_text(codeforces) and codeforces["source"].endswith("(codeforces)")


def test_lcb_functional_problem_without_func_name_is_refused() -> None:
    with pytest.raises(RecordError, match=r"without metadata\.func_name"):
        convert("livecodebench", sample("livecodebench")[4])


# -- TACO / APPS -------------------------------------------------------------------------------------


def test_taco_call_based_rows_are_functional_with_apps_matching() -> None:
    records = sample("taco")
    rows = [convert("taco", r) for r in records[:4]]
    assert [r["verifier_metadata"]["style"] for r in rows] == ["stdio", "functional", "functional", "stdio"]
    codewars = rows[1]["verifier_metadata"]
    assert codewars["fn_name"] == "add_binary" and codewars["match"] == "apps"
    assert (
        codewars["unit_tests"]["inputs"][0] == "[1, 1]" and codewars["unit_tests"]["outputs"][0] == '["10"]'
    )
    assert "def add_binary(a,b):" in user_text(rows[1]) and rows[1]["source"] == "BAAI/TACO (codewars)"
    assert len({r["task_id"] for r in rows}) == 4 and all(r["task_id"].startswith("taco/") for r in rows)
    with pytest.raises(RecordError, match="no tests"):
        convert("taco", records[4])


def test_apps_stdio_tests_given_as_line_lists_are_joined() -> None:
    records = sample("apps")
    row = convert("apps", records[3])
    assert row["task_id"] == "apps/4002"
    assert row["verifier_metadata"]["unit_tests"] == {
        "inputs": ["Ann\nBob", "x\ny"], "outputs": ["Hello, Ann!\nHello, Bob!", "Hello, x!\nHello, y!"],
    }  # fmt: skip
    assert convert("apps", records[1])["verifier_metadata"]["fn_name"] == "twoSum"
    with pytest.raises(RecordError, match=r"no tests \(input_output is empty\)"):
        convert("apps", records[4])


# -- graded by the real grader -------------------------------------------------------------------------

LCB_SOLUTIONS = {
    "lcb/3221": "class Solution:\n    def findPeaks(self, mountain: List[int]) -> List[int]:\n        return [i for i in "
    "range(1, len(mountain) - 1) if mountain[i - 1] < mountain[i] > mountain[i + 1]]\n",
    "lcb/3093": "class Solution:\n    def sumIndicesWithKSetBits(self, nums: List[int], k: int) -> int:\n"
    "        return sum(x for i, x in enumerate(nums) if bin(i).count('1') == k)\n",
    "lcb/abc341_a": "n = int(input())\nprint('10' * n + '1')\n",
    "lcb/1899A": "for _ in range(int(input())):\n    print('Second' if int(input()) % 3 == 0 else 'First')\n",
}
WRONG = {
    "function": "def {name}(*args):\n    return None\n",
    "functional": "class Solution:\n    def {name}(self, *args):\n        return None\n\n\ndef {name}(*args):\n    return None\n",
    "stdio": "print(42)\n",
}


def references(name: str) -> list[tuple[dict[str, Any], str]]:
    """(row, a reply holding the dataset's own reference solution) for every convertible record."""
    pairs = []
    for record in sample(name):
        try:
            row = convert(name, record)
        except RecordError:
            continue
        if name.startswith("humaneval"):
            code = record["prompt"] + record["canonical_solution"]
        elif name.startswith("mbpp"):
            code = record["code"]
        elif name == "livecodebench":
            code = LCB_SOLUTIONS[row["task_id"]]
        else:
            code = json.loads(record["solutions"])[0]
        pairs.append((row, reply(code)))
    return pairs


def wrong_reply(row: dict[str, Any]) -> str:
    meta = row["verifier_metadata"]
    return reply(WRONG[meta["style"]].format(name=meta.get("entry_point") or meta.get("fn_name")))


@pytest.mark.bwrap
@pytest.mark.parametrize(
    "name", ["humaneval", "humaneval_plus", "mbpp", "mbpp_plus", "livecodebench", "taco", "apps"]
)
def test_reference_solutions_score_one_and_wrong_ones_zero(name: str) -> None:
    async def grade() -> None:
        task = CodeTask(CodeConfig(runners=2))
        try:
            pairs = references(name)
            assert len(pairs) >= 4
            good = await asyncio.gather(*(task.evaluate(row, text) for row, text in pairs))
            assert {row["task_id"]: o.reward for (row, _), o in zip(pairs, good, strict=True)} == {
                row["task_id"]: 1.0 for row, _ in pairs
            }, [o.detail for o in good if o.reward != 1.0]
            bad = await asyncio.gather(*(task.evaluate(row, wrong_reply(row)) for row, _ in pairs))
            assert [o.reward for o in bad] == [0.0] * len(pairs)
        finally:
            await task.aclose()

    asyncio.run(grade())
