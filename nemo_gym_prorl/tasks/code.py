# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Code: write a program; hidden tests decide. Tools: bash, editor, python (IPython).

Three test styles, all in `row["verifier_metadata"]` (the layout of NeMo Gym's `code_gen`):
  - function style (HumanEval, MBPP): `{"style": "function", "prompt", "entry_point", "test"}`;
    the program is prompt + completion + test + `check(entry_point)`; one unit: pass or fail.
    An empty prompt (MBPP: the model writes the whole function) runs the completion as is.
  - stdin/stdout style (CodeContests/APPS/TACO): `{"unit_tests": {"inputs": [...],
    "outputs": [...]}}`; each pair runs as its own isolated process; output compared token by
    token (floats within a tolerance). Reward = (1 - w) * all_passed + w * fraction_passed, with
    `w = partial_credit_weight`, reported as the components `all_tests` and `partial_tests`.
  - functional style (LeetCode-style LiveCodeBench, call-based APPS/TACO): `{"style":
    "functional", "fn_name", "unit_tests": {"inputs": [JSON array of the arguments, ...],
    "outputs": [JSON of the return value, ...]}, "match": "exact" | "apps"}`; each test is its
    own process calling `Solution().<fn_name>(*args)` (or the top-level `<fn_name>`); the return
    value (tuples as lists) must equal the expected one; `match: "apps"` also accepts the
    expected value's single element, as APPS/TACO's harness does. Scored like stdin/stdout.

Hidden tests never run in the RUN sandbox. Each test is its own process forked from a pristine
interpreter inside a sandbox used only for tests (`runner.py`), with time, memory, file-size and
output limits; `isolation="sandbox"` gives each evaluation a brand-new sandbox as well.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import secrets
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, Field

from nemo_gym_prorl.pipeline.handler import InvalidInstanceError
from nemo_gym_prorl.sandbox import SandboxSpec
from nemo_gym_prorl.tasks.base import BASH, EDITOR, IPYTHON, EvalOutcome, TaskDomain, strip_thinking
from nemo_gym_prorl.tasks.runner import RunnerPool, RunOutcome, RunRequest, run_in_fresh_sandbox

_FENCE_RE = re.compile(r"```[ \t]*([A-Za-z0-9_+\-]*)[^\n]*\n(.*?)```", re.S)
_PY_LANGS = {"python", "py", "python3", "py3", ""}
SOLUTION_FILE = "solution.py"


class CodeConfig(BaseModel):
    timeout_s: float = Field(10.0, gt=0, description="Per test process.")
    memory_mb: int = Field(1024, gt=0)
    max_output_bytes: int = Field(64 * 1024, gt=0)
    partial_credit_weight: float = Field(0.3, ge=0.0, le=1.0, description="Weight of the pass fraction.")
    float_tolerance: float = Field(1e-6, ge=0.0)
    isolation: Literal["fork", "sandbox"] = Field(
        "fork",
        description="fork: every test a fresh process in a warm test-only sandbox (fast); "
        "sandbox: additionally a brand-new sandbox per evaluation.",
    )
    runners: int | None = Field(None, description="Warm runner sandboxes (default: CPU count).")
    max_tests: int = Field(64, gt=0, description="Cap on stdin/stdout pairs run per evaluation.")


def extract_code(text: str | None) -> str | None:
    """The last Python code block of a reply (```python ...```, or an untagged fence)."""
    if not text:
        return None
    text = strip_thinking(text)
    blocks = [(lang.lower(), body) for lang, body in _FENCE_RE.findall(text)]
    py = [body for lang, body in blocks if lang in _PY_LANGS]
    if py:
        return py[-1]
    return None


def function_program(prompt: str, completion: str, test: str, entry_point: str) -> str:
    """HumanEval-style program. A completion that (re)defines the entry point replaces the
    prompt's stub (its imports and helpers stay); otherwise it is the body after the prompt."""
    if not prompt.strip():  # MBPP: no stub to complete, the completion is the whole program
        body = completion
    elif re.search(rf"^\s*def\s+{re.escape(entry_point)}\s*\(", completion, re.M):
        body = prompt.rstrip() + "\n    pass\n\n\n" + completion
    else:
        body = prompt + completion
    return f"{body}\n\n{test}\n\ncheck({entry_point})\n"


def _tokens_equal(got: str, want: str, tol: float) -> bool:
    a, b = got.split(), want.split()
    if a == b:
        return True
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if x == y:
            continue
        try:
            fx, fy = float(x), float(y)
        except ValueError:
            return False
        if not (math.isfinite(fx) and math.isfinite(fy)) or not math.isclose(
            fx, fy, rel_tol=tol, abs_tol=tol
        ):
            return False
    return True


def outputs_match(got: str, want: str, tol: float = 1e-6) -> bool:
    """Line by line, whitespace-insensitive within lines, trailing blank lines ignored; numbers
    compared with tolerance."""
    g = [ln.strip() for ln in got.strip().splitlines()]
    w = [ln.strip() for ln in want.strip().splitlines()]
    if g == w:
        return True
    return _tokens_equal(got, want, tol)


# What LiveCodeBench puts before a call-based solution (`import_string` in
# lcb_runner/evaluation/testing_util.py): LeetCode starter code uses `List[int]`, `Optional`, ...
# without importing them, and solutions lean on these names too.
FUNCTIONAL_PRELUDE = (
    "from string import *\nfrom re import *\nfrom datetime import *\nfrom collections import *\n"
    "from heapq import *\nfrom bisect import *\nfrom copy import *\nfrom math import *\n"
    "from random import *\nfrom statistics import *\nfrom itertools import *\n"
    "from functools import *\nfrom operator import *\nfrom io import *\nfrom sys import *\n"
    "from json import *\nfrom builtins import *\nfrom typing import *\nimport string\nimport re\n"
    "import datetime\nimport collections\nimport heapq\nimport bisect\nimport copy\nimport math\n"
    "import random\nimport statistics\nimport itertools\nimport functools\nimport operator\n"
    "import io\nimport sys\nimport json\nsys.setrecursionlimit(50000)\n"
)

# Runs after the solution, in the test's own process: calls the function once and writes its
# return value as JSON after a marker the solution cannot know (a fresh one per evaluation), so
# nothing the solution prints can pass for a result. The comparison happens in the grader.
_FUNCTIONAL_HARNESS = """

def __prorl_functional_test():
    import json as _json
    import sys as _sys

    if hasattr(_sys, "set_int_max_str_digits"):
        _sys.set_int_max_str_digits(0)
    _args = _json.loads({args!r})
    if {int_keys!r} and _args and isinstance(_args[0], dict):
        # APPS/TACO: JSON made the int keys of a dict argument strings; their harness undoes it
        try:
            _args[0] = {{int(k): v for k, v in _args[0].items()}}
        except ValueError:
            pass
    _cls = globals().get("Solution")
    if isinstance(_cls, type) and hasattr(_cls, {fn_name!r}):
        _fn = getattr(_cls(), {fn_name!r})
    else:
        _fn = globals()[{fn_name!r}]
    _result = _fn(*_args)
    _sys.stdout.write("\\n" + {marker!r} + _json.dumps(_result, default=repr) + "\\n")
    _sys.stdout.flush()


__prorl_functional_test()
"""

FunctionalMatch = Literal["exact", "apps"]


def functional_program(code: str, fn_name: str, args_json: str, marker: str, match: FunctionalMatch) -> str:
    """One functional test: the prelude, the solution, then a call of `fn_name` with the JSON
    array `args_json` whose return value is printed after `marker`."""
    harness = _FUNCTIONAL_HARNESS.format(
        args=args_json, int_keys=match == "apps", fn_name=fn_name, marker=marker
    )
    return f"{FUNCTIONAL_PRELUDE}\n{code}\n{harness}"


def returned_value_matches(stdout: str, marker: str, want_json: str, match: FunctionalMatch) -> bool:
    """Whether the value the harness printed equals the expected JSON value. Tuples arrive as
    lists (neither LiveCodeBench nor APPS penalises a tuple for a list); `match="apps"` also
    accepts the expected value's only element (APPS/TACO wrap many outputs in a list)."""
    if marker not in stdout:
        return False
    line = stdout.rsplit(marker, 1)[1].split("\n", 1)[0]
    try:
        got, want = json.loads(line), json.loads(want_json)
    except ValueError:
        return False
    if got == want:
        return True
    return match == "apps" and isinstance(want, list) and len(want) > 0 and got == want[0]


class CodeTask(TaskDomain):
    name = "code"
    data_sources = ("prorl_code", "humaneval", "code", "codecontests", "taco", "apps")
    default_tools = (BASH, EDITOR, IPYTHON)

    def __init__(self, config: CodeConfig | None = None, runner_spec: SandboxSpec | None = None) -> None:
        self.config = config or CodeConfig()
        self.runner_spec = runner_spec
        self._pool: RunnerPool | None = None

    @property
    def pool(self) -> RunnerPool:
        if self._pool is None:
            self._pool = RunnerPool(size=self.config.runners, spec=self.runner_spec)
        return self._pool

    async def run_programs(self, reqs: list[RunRequest]) -> list[RunOutcome]:
        if self.config.isolation == "sandbox":
            return await run_in_fresh_sandbox(reqs, self.runner_spec)
        return await self.pool.run_many(reqs)

    def _request(self, code: str, stdin: str = "", timeout_s: float | None = None) -> RunRequest:
        return RunRequest(
            code=code,
            stdin=stdin,
            timeout_s=timeout_s or self.config.timeout_s,
            memory_mb=self.config.memory_mb,
            max_output_bytes=self.config.max_output_bytes,
        )

    async def collect_artifacts(self, sandbox: Any, row: Mapping[str, Any]) -> dict[str, Any]:
        """If the agent wrote `solution.py` in its workspace, EVAL may use it as a fallback."""
        try:
            path = sandbox.host_path(SOLUTION_FILE)
            if path.is_file() and path.stat().st_size < 1_000_000:
                return {"solution_file": path.read_text(errors="replace")}
        except Exception:
            pass
        return {}

    def check_row(self, row: Mapping[str, Any]) -> None:
        """The tests EVAL runs are in the row, in one of the three styles."""
        super().check_row(row)
        meta = row.get("verifier_metadata")
        if not isinstance(meta, Mapping):
            raise InvalidInstanceError("verifier_metadata", "is missing: a code row needs the tests to run")
        if meta.get("style") == "function" or "entry_point" in meta:
            missing = [k for k in ("prompt", "test", "entry_point") if not isinstance(meta.get(k), str)]
            if missing:
                raise InvalidInstanceError(f"verifier_metadata.{missing[0]}", "is missing (a function test)")
            return
        if meta.get("style") == "functional":
            fn_name = meta.get("fn_name")
            if not isinstance(fn_name, str) or not fn_name.isidentifier():
                raise InvalidInstanceError("verifier_metadata.fn_name", "must be a Python identifier")
        if self._test_pairs(meta.get("unit_tests")) is None:
            raise InvalidInstanceError(
                "verifier_metadata.unit_tests", "needs equal-length, non-empty `inputs` and `outputs`"
            )

    async def evaluate(
        self, row: Mapping[str, Any], final_text: str | None, artifacts: Mapping[str, Any] | None = None
    ) -> EvalOutcome:
        meta = row.get("verifier_metadata")
        if not isinstance(meta, Mapping):
            return EvalOutcome.zero("bad_row", "row has no verifier_metadata")
        code = extract_code(final_text)
        source = "final_message"
        if code is None and artifacts and isinstance(artifacts.get("solution_file"), str):
            code, source = artifacts["solution_file"], "solution_file"
        if code is None or not code.strip():
            return EvalOutcome.zero("no_code", "no ```python code block in the final message")
        timeout = meta.get("timeout_s")
        timeout = float(timeout) if isinstance(timeout, (int, float)) and timeout > 0 else None
        if meta.get("style") == "function" or "entry_point" in meta:
            return await self._evaluate_function(meta, code, source, timeout)
        if meta.get("style") == "functional":
            return await self._evaluate_functional(meta, code, source, timeout)
        tests = meta.get("unit_tests")
        if isinstance(tests, Mapping):
            return await self._evaluate_stdio(tests, code, source, timeout)
        return EvalOutcome.zero("bad_row", "verifier_metadata has neither entry_point nor unit_tests")

    async def _evaluate_function(
        self, meta: Mapping[str, Any], code: str, source: str, timeout: float | None
    ) -> EvalOutcome:
        try:
            program = function_program(str(meta["prompt"]), code, str(meta["test"]), str(meta["entry_point"]))
        except KeyError as exc:
            return EvalOutcome.zero("bad_row", f"function test lacks {exc}")
        (out,) = await self.run_programs([self._request(program, timeout_s=timeout)])
        report = {"source": source, "style": "function", "run": _summary(out)}
        if out.infra_error:
            return EvalOutcome.infra_failure(out.infra_error, report=report)
        passed = out.ok
        return EvalOutcome.from_components(
            {"tests": 1.0 if passed else 0.0},
            reason="correct" if passed else (out.error_type or "failed"),
            detail=None if passed else out.stderr[-2000:],
            report={**report, "tests_passed": int(passed), "tests_total": 1},
        )

    def _test_pairs(self, tests: object) -> list[tuple[Any, Any]] | None:
        """The (input, expected output) pairs to run, at most `max_tests`; None if malformed."""
        inputs = tests.get("inputs") if isinstance(tests, Mapping) else None
        outputs = tests.get("outputs") if isinstance(tests, Mapping) else None
        if (
            not isinstance(inputs, list)
            or not isinstance(outputs, list)
            or len(inputs) != len(outputs)
            or not inputs
        ):
            return None
        return list(zip(inputs, outputs, strict=True))[: self.config.max_tests]

    async def _evaluate_stdio(
        self, tests: Mapping[str, Any], code: str, source: str, timeout: float | None
    ) -> EvalOutcome:
        pairs = self._test_pairs(tests)
        if pairs is None:
            return EvalOutcome.zero("bad_row", "unit_tests needs equal-length, non-empty inputs and outputs")
        reqs = [self._request(code, stdin=str(i), timeout_s=timeout) for i, _ in pairs]
        outs = await self.run_programs(reqs)
        results = []
        for (_, want), out in zip(pairs, outs, strict=True):
            ok = out.ok and outputs_match(out.stdout, str(want), self.config.float_tolerance)
            results.append(ok)
        return self._tests_outcome("stdio", results, outs, source)

    async def _evaluate_functional(
        self, meta: Mapping[str, Any], code: str, source: str, timeout: float | None
    ) -> EvalOutcome:
        fn_name, tests = meta.get("fn_name"), meta.get("unit_tests")
        if not isinstance(fn_name, str) or not fn_name.isidentifier():
            return EvalOutcome.zero("bad_row", "functional test needs fn_name, a Python identifier")
        pairs = self._test_pairs(tests)
        if pairs is None:
            return EvalOutcome.zero("bad_row", "unit_tests needs equal-length, non-empty inputs and outputs")
        match: FunctionalMatch = "apps" if meta.get("match") == "apps" else "exact"
        marker = f"@@prorl-return-{secrets.token_hex(8)}@@"
        reqs = [
            self._request(functional_program(code, fn_name, str(args), marker, match), timeout_s=timeout)
            for args, _ in pairs
        ]
        outs = await self.run_programs(reqs)
        results = [
            out.ok and returned_value_matches(out.stdout, marker, str(want), match)
            for (_, want), out in zip(pairs, outs, strict=True)
        ]
        return self._tests_outcome("functional", results, outs, source)

    def _tests_outcome(
        self, style: str, results: list[bool], outs: list[RunOutcome], source: str
    ) -> EvalOutcome:
        """The reward of a run of tests, one process each: all passed, plus partial credit."""
        infra = [o.infra_error for o in outs if o.infra_error]
        n_pass, n = sum(results), len(results)
        report: dict[str, Any] = {
            "source": source,
            "style": style,
            "tests_passed": n_pass,
            "tests_total": n,
            "per_test": [
                {"passed": ok, "error_type": o.error_type, "duration_s": round(o.duration_s, 4)}
                for ok, o in zip(results, outs, strict=True)
            ],
        }
        if infra:
            return EvalOutcome.infra_failure(infra[0], report=report)
        w = self.config.partial_credit_weight
        all_passed = n_pass == n
        first_fail = next((o for ok, o in zip(results, outs, strict=True) if not ok), None)
        return EvalOutcome.from_components(
            {"all_tests": (1.0 - w) * float(all_passed), "partial_tests": w * n_pass / n},
            reason="correct"
            if all_passed
            else (first_fail.error_type if first_fail else None) or "wrong_output",
            detail=None if all_passed or first_fail is None else first_fail.stderr[-1000:] or None,
            report=report,
        )

    async def aclose(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.aclose()


def _summary(out: RunOutcome) -> dict[str, Any]:
    return {
        "exit_code": out.exit_code,
        "error_type": out.error_type,
        "timed_out": out.timed_out,
        "output_truncated": out.output_truncated,
        "duration_s": round(out.duration_s, 4),
        "stderr_tail": out.stderr[-500:],
    }


async def evaluate_many(task: CodeTask, items: list[tuple[Mapping[str, Any], str]]) -> list[EvalOutcome]:
    """Evaluate many (row, final_text) pairs concurrently (the pool bounds parallelism)."""
    return list(await asyncio.gather(*(task.evaluate(row, text) for row, text in items)))
