# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""CODE datasets -> `prorl_code` rows, graded by `nemo_gym_prorl.tasks.code` in one of its three
test styles (`row["verifier_metadata"]`):

  - function (HumanEval, HumanEval+, MBPP, MBPP+): prompt + completion + test + `check(entry)`;
  - stdio (stdin/stdout programs of LiveCodeBench, APPS, TACO): `unit_tests` inputs/outputs;
  - functional (LeetCode-style LiveCodeBench, call-based APPS/TACO): `Solution().<fn>(*args)`
    or `<fn>(*args)` per test, `unit_tests` inputs as JSON arrays of the arguments and outputs as
    JSON of the return values.
"""

from __future__ import annotations

import ast
import base64
import binascii
import io
import json
import pickle
import re
import textwrap
import zlib
from collections.abc import Mapping
from functools import partial
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from nemo_gym_prorl.datasets.catalog import DatasetEnvironment, RecordError, Tools, content_id
from nemo_gym_prorl.datasets.converters.math import text_field
from nemo_gym_prorl.datasets.rows import make_row
from nemo_gym_prorl.datasets.sources import CODE_SYSTEM

EVALPLUS_TIMEOUT_S = 30.0  # one process runs all of an EvalPlus task's (hundreds of) inputs

STDIO_INSTRUCTION = (
    "Write a Python program that reads the input from standard input and writes the answer to "
    "standard output. Reply with the complete program in a ```python code block."
)


def code_text(record: Mapping[str, Any], *names: str) -> str:
    """The first of `names` holding non-blank text, kept verbatim: indentation and trailing
    newlines of code fields matter (`text_field` strips)."""
    for name in names:
        value = record.get(name)
        if isinstance(value, str) and value.strip():
            return value
    raise RecordError(f"no {' / '.join(names)} field")


def optional_text(record: Mapping[str, Any], name: str) -> str:
    value = record.get(name)
    return value if isinstance(value, str) else ""


def code_row(
    task_id: str, user: str, source: str, meta: dict[str, Any], tools: Tools, agent: str
) -> dict[str, Any]:
    return make_row(
        "prorl_code", task_id, CODE_SYSTEM, user, tools, agent, source=source, verifier_metadata=meta
    )


# -- HumanEval / HumanEval+ ---------------------------------------------------------------------


def function_prompt(prompt: str) -> str:
    return (
        "Complete the following Python function. Reply with the complete function (including "
        f"its signature) in a ```python code block.\n\n```python\n{prompt}```"
    )


def humaneval(record: Mapping[str, Any], tools: Tools, agent: str, hub_id: str, plus: bool) -> dict[str, Any]:
    """openai/openai_humaneval and evalplus/humanevalplus share one schema; HumanEval+'s `test`
    is EvalPlus's stronger `check(candidate)` over hundreds of inputs (it imports numpy)."""
    task_id = text_field(record, "task_id")
    prompt = code_text(record, "prompt")
    entry_point = text_field(record, "entry_point")
    test = code_text(record, "test")
    if not re.search(r"^def\s+check\s*\(", test, re.M):
        raise RecordError("HumanEval test defines no check(candidate)")
    meta: dict[str, Any] = {"style": "function", "prompt": prompt, "entry_point": entry_point, "test": test}
    if plus:
        meta["timeout_s"] = EVALPLUS_TIMEOUT_S
        task_id = task_id.replace("HumanEval/", "HumanEvalPlus/", 1)
    return code_row(task_id, function_prompt(prompt), hub_id, meta, tools, agent)


# -- MBPP / MBPP+ -------------------------------------------------------------------------------

_TOP_LEVEL_DEF_RE = re.compile(r"^def\s+([A-Za-z_]\w*)\s*\(", re.M)


def called_names(asserts: list[str]) -> list[str]:
    """Names called in the asserts, in order (`assert set(similar_elements(a, b)) == ...`)."""
    names: list[str] = []
    for line in asserts:
        try:
            tree = ast.parse(line.strip())
        except SyntaxError as exc:
            raise RecordError(f"MBPP test is not Python: {line[:80]!r}") from exc
        calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)]
        names += [c.func.id for c in sorted(calls, key=lambda c: (c.lineno, c.col_offset))]  # type: ignore[union-attr]
    return names


def mbpp_entry_point(code: str, asserts: list[str]) -> str:
    """The function the asserts call that the reference code defines (MBPP has no entry_point
    field: its asserts call the function by name, often inside `set(...)` or `math.isclose`)."""
    defined = set(_TOP_LEVEL_DEF_RE.findall(code))
    for name in called_names(asserts):
        if name in defined:
            return name
    raise RecordError("MBPP asserts call no function the reference code defines")


def string_list(record: Mapping[str, Any], name: str) -> list[str]:
    value = record.get(name)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise RecordError(f"MBPP {name} is not a list of strings")
    return [v for v in value if v.strip()]


def asserts_test(setup: str, asserts: list[str]) -> str:
    """A `check(candidate)` that runs MBPP's asserts (they call the function by its name)."""
    body = "".join(textwrap.indent(a.strip(), "    ") + "\n" for a in asserts)
    head = f"{setup.strip()}\n\n\n" if setup.strip() else ""
    return f"{head}def check(candidate):\n{body}"


def mbpp_prompt(task: str, shown: list[str]) -> str:
    tests = "\n".join(a.strip() for a in shown)
    return (
        f"{task}\n\nYour code should pass these tests:\n\n```python\n{tests}\n```\n\n"
        "Reply with the complete Python function (with any imports it needs) in a ```python code block."
    )


def mbpp(record: Mapping[str, Any], tools: Tools, agent: str, hub_id: str, prefix: str) -> dict[str, Any]:
    """MBPP `full` (`text`, `test_setup_code`, `challenge_test_list`), MBPP `sanitized` (`prompt`,
    `test_imports`) and MBPP+ (sanitized fields plus `test`: EvalPlus's module-level assertions)."""
    task_id = text_field(record, "task_id")
    task = text_field(record, "text", "prompt")
    code = code_text(record, "code")
    shown = string_list(record, "test_list")
    if not shown:
        raise RecordError("MBPP record without test_list")
    entry_point = mbpp_entry_point(code, shown)
    setup = optional_text(record, "test_setup_code") or "\n".join(string_list(record, "test_imports"))
    plus_test = optional_text(record, "test")
    if plus_test.strip():
        # MBPP+'s test calls the function by name at module level, after the solution; the
        # function style then calls `check`, which has nothing left to do.
        test = f"{plus_test.rstrip()}\n\n\ndef check(candidate):\n    return None\n"
    else:
        test = asserts_test(setup, shown + string_list(record, "challenge_test_list"))
    meta: dict[str, Any] = {"style": "function", "prompt": "", "entry_point": entry_point, "test": test}
    if plus_test.strip():
        meta["timeout_s"] = EVALPLUS_TIMEOUT_S
    return code_row(f"{prefix}/{task_id}", mbpp_prompt(task, shown), hub_id, meta, tools, agent)


# -- tests as the grader reads them -------------------------------------------------------------


def stdio_meta(inputs: list[str], outputs: list[str]) -> dict[str, Any]:
    return {"style": "stdio", "unit_tests": {"inputs": inputs, "outputs": outputs}}


def functional_meta(
    fn_name: str, args: list[list[Any]], returns: list[Any], match: Literal["exact", "apps"]
) -> dict[str, Any]:
    """JSON text per test (rows stay one Arrow type whatever the arguments are)."""
    if not fn_name.isidentifier():
        raise RecordError(f"function name {fn_name!r} is not a Python identifier")
    inputs = [json.dumps(a) for a in args]
    outputs = [json.dumps(r) for r in returns]
    return {"style": "functional", "fn_name": fn_name, "unit_tests": {"inputs": inputs, "outputs": outputs},
            "match": match}  # fmt: skip


def functional_prompt(question: str, starter_code: str, fn_name: str) -> str:
    starter = starter_code.strip() or f"def {fn_name}(...):"
    return (
        f"{question.strip()}\n\nWrite the solution in Python using this starter code: the tests call "
        f"`{fn_name}` directly with the arguments and check its return value.\n\n"
        f"```python\n{starter}\n```\n\nReply with the complete code (the class or function with "
        "any imports it needs) in a ```python code block."
    )


def stdio_prompt(question: str) -> str:
    return f"{question.strip()}\n\n{STDIO_INSTRUCTION}"


# -- LiveCodeBench --------------------------------------------------------------------------------


class _NoGlobalsUnpickler(pickle.Unpickler):
    """LiveCodeBench's private tests are a pickled *str*: no class, no function, no global is
    needed to rebuild one, so any reference to one is refused (never executed)."""

    def find_class(self, module: str, name: str) -> Any:
        raise RecordError(f"private_test_cases pickle refers to {module}.{name}; only a str is expected")


def _unpickled_text(encoded: str) -> str:
    """base64 -> zlib -> a pickled str, unpickled without any global (see `_NoGlobalsUnpickler`)."""
    try:
        payload = zlib.decompress(base64.b64decode(encoded.encode(), validate=True))
        text = _NoGlobalsUnpickler(io.BytesIO(payload)).load()
    except RecordError:
        raise
    except (binascii.Error, zlib.error, pickle.UnpicklingError, EOFError, ValueError) as exc:
        raise RecordError(f"private_test_cases is neither JSON nor base64/zlib/pickle: {exc}") from exc
    if not isinstance(text, str):
        raise RecordError(f"private_test_cases pickle holds a {type(text).__name__}, not a str")
    return text


def lcb_private_tests(encoded: str) -> list[Any]:
    """`private_test_cases`: JSON text in early releases, else base64 of zlib of a pickled JSON
    string (lcb_runner/benchmarks/code_generation.py tries JSON first, then the encoding)."""
    if not encoded.strip():
        return []
    try:
        decoded: Any = json.loads(encoded)
    except ValueError:
        try:
            decoded = json.loads(_unpickled_text(encoded))
        except ValueError as exc:
            if isinstance(exc, RecordError):
                raise
            raise RecordError("decoded private_test_cases is not JSON") from exc
    if not isinstance(decoded, list):
        raise RecordError("private_test_cases is not a list of tests")
    return decoded


class LcbTest(BaseModel):
    """One LiveCodeBench test (`Test` in lcb_runner/benchmarks/code_generation.py)."""

    model_config = ConfigDict(extra="ignore")

    input: str
    output: str
    testtype: Literal["stdin", "functional"]


def lcb_tests(record: Mapping[str, Any]) -> list[LcbTest]:
    try:
        public = json.loads(optional_text(record, "public_test_cases") or "[]")
    except ValueError as exc:
        raise RecordError("public_test_cases is not JSON") from exc
    if not isinstance(public, list):
        raise RecordError("public_test_cases is not a list of tests")
    raw = public + lcb_private_tests(optional_text(record, "private_test_cases"))
    try:
        return [LcbTest.model_validate(t) for t in raw]
    except ValidationError as exc:
        raise RecordError(
            f"LiveCodeBench test without input/output/testtype: {exc.errors()[0]['msg']}"
        ) from exc


def lcb_call_arguments(test_input: str) -> list[Any]:
    """A functional test's input: one JSON value per line, the arguments in order."""
    try:
        return [json.loads(line) for line in test_input.split("\n")]
    except ValueError as exc:
        raise RecordError("functional test input is not one JSON value per line") from exc


def lcb_return_value(test_output: str) -> Any:
    try:
        return json.loads(test_output)
    except ValueError as exc:
        raise RecordError("functional test output is not JSON") from exc


def livecodebench(record: Mapping[str, Any], tools: Tools, agent: str) -> dict[str, Any]:
    question_id = text_field(record, "question_id")
    question = code_text(record, "question_content")
    tests = lcb_tests(record)
    if not tests:
        raise RecordError("LiveCodeBench problem without tests")
    kinds = {t.testtype for t in tests}
    if kinds == {"stdin"}:
        meta = stdio_meta([t.input for t in tests], [t.output for t in tests])
        user = stdio_prompt(question)
    elif kinds == {"functional"}:
        try:
            fn_name = str(json.loads(optional_text(record, "metadata") or "{}").get("func_name") or "")
        except (ValueError, AttributeError) as exc:
            raise RecordError("metadata is not a JSON object") from exc
        if not fn_name:
            raise RecordError("functional LiveCodeBench problem without metadata.func_name")
        args = [lcb_call_arguments(t.input) for t in tests]
        meta = functional_meta(fn_name, args, [lcb_return_value(t.output) for t in tests], "exact")
        user = functional_prompt(question, optional_text(record, "starter_code"), fn_name)
    else:
        raise RecordError(f"LiveCodeBench problem mixes test types {sorted(kinds)}")
    title = optional_text(record, "question_title").strip()
    if title:
        user = f"### {title}\n\n{user}"
    source = f"livecodebench/code_generation_lite ({optional_text(record, 'platform') or 'unknown platform'})"
    return code_row(f"lcb/{question_id}", user, source, meta, tools, agent)


# -- APPS / TACO ----------------------------------------------------------------------------------


class InputOutput(BaseModel):
    """APPS/TACO `input_output` (a JSON string): stdin/stdout texts, or with `fn_name` the
    argument lists and return values of calls (APPS eval/testing_util.py `run_test`)."""

    model_config = ConfigDict(extra="ignore")

    inputs: list[Any] = Field(default_factory=list)
    outputs: list[Any] = Field(default_factory=list)
    fn_name: str | None = None


def input_output(record: Mapping[str, Any]) -> InputOutput:
    text = optional_text(record, "input_output")
    if not text.strip():
        raise RecordError("no tests (input_output is empty)")
    try:
        parsed = InputOutput.model_validate_json(text)
    except ValidationError as exc:
        raise RecordError(f"input_output is not the APPS test JSON: {exc.errors()[0]['msg']}") from exc
    if not parsed.inputs or len(parsed.inputs) != len(parsed.outputs):
        raise RecordError("no tests (input_output has no inputs, or not one output per input)")
    return parsed


def stdio_text(value: Any) -> str:
    """APPS/TACO sometimes store a stdin/stdout text as its list of lines."""
    if isinstance(value, list):
        return "\n".join(str(v) for v in value)
    if isinstance(value, str):
        return value
    raise RecordError(f"stdin/stdout test is a {type(value).__name__}, not text")


def apps_style(
    record: Mapping[str, Any], source: str, task_id: str, tools: Tools, agent: str
) -> dict[str, Any]:
    question = code_text(record, "question")
    tests = input_output(record)
    if tests.fn_name:
        if not all(isinstance(args, list) for args in tests.inputs):
            raise RecordError("call-based test inputs are not argument lists")
        meta = functional_meta(tests.fn_name, tests.inputs, tests.outputs, "apps")
        user = functional_prompt(question, optional_text(record, "starter_code"), tests.fn_name)
    else:
        meta = stdio_meta([stdio_text(i) for i in tests.inputs], [stdio_text(o) for o in tests.outputs])
        user = stdio_prompt(question)
    return code_row(task_id, user, source, meta, tools, agent)


def apps(record: Mapping[str, Any], tools: Tools, agent: str) -> dict[str, Any]:
    problem_id = text_field(record, "problem_id")
    source = f"codeparrot/apps ({optional_text(record, 'difficulty') or 'unrated'})"
    return apps_style(record, source, f"apps/{problem_id}", tools, agent)


def taco(record: Mapping[str, Any], tools: Tools, agent: str) -> dict[str, Any]:
    # TACO records carry no id: the question text identifies a problem (TACO removed duplicates)
    question = code_text(record, "question")
    source = f"BAAI/TACO ({optional_text(record, 'source') or 'unknown source'})"
    return apps_style(record, source, f"taco/{content_id(question)}", tools, agent)


ENVIRONMENTS: tuple[DatasetEnvironment, ...] = (
    DatasetEnvironment(
        name="humaneval",
        title="HumanEval",
        domain="code",
        hub_id="openai/openai_humaneval",
        hub_subset="openai_humaneval",
        train_splits=("test",),
        published_rows="164 test",
        license="MIT",
        gym_license="MIT",
        schema_source="https://huggingface.co/datasets/openai/openai_humaneval (config `openai_humaneval`: "
        "task_id, prompt, canonical_solution, test, entry_point; card commit bd7ebee7436305b5ace9144a7357b4eb5676b417)",
        max_turns=6,
        convert=partial(humaneval, hub_id="openai/openai_humaneval", plus=False),
    ),
    DatasetEnvironment(
        name="humaneval_plus",
        title="HumanEval+ (EvalPlus)",
        domain="code",
        hub_id="evalplus/humanevalplus",
        train_splits=("test",),
        published_rows="164 test",
        license="Apache-2.0",
        gym_license="Apache 2.0",
        schema_source="https://huggingface.co/datasets/evalplus/humanevalplus at "
        "d32357cf319e50e9c8d8dab5ea876c72b0fd321b (task_id, prompt, canonical_solution, entry_point, "
        "test: numpy `assertion` helper + `check(candidate)` over EvalPlus's inputs/results)",
        needs="numpy in the sandbox runtime (built by `make setup`): EvalPlus's test imports it",
        max_turns=6,
        convert=partial(humaneval, hub_id="evalplus/humanevalplus", plus=True),
    ),
    DatasetEnvironment(
        name="mbpp",
        title="MBPP",
        domain="code",
        hub_id="google-research-datasets/mbpp",
        hub_subset="full",
        train_splits=("train",),
        validation_split="validation",
        published_rows="full: 374 train, 90 validation, 500 test, 10 prompt; sanitized: 120 train, "
        "43 validation, 257 test, 7 prompt",
        license="CC-BY-4.0",
        gym_license="Creative Commons Attribution 4.0 International",
        schema_source="https://huggingface.co/datasets/google-research-datasets/mbpp at "
        "7bc94ee8bd8f4b07324968e85b7b54f505cba1e5 (full: task_id, text, code, test_list, test_setup_code, "
        "challenge_test_list; sanitized: source_file, task_id, prompt, code, test_imports, test_list)",
        max_turns=6,
        convert=partial(mbpp, hub_id="google-research-datasets/mbpp", prefix="mbpp"),
    ),
    DatasetEnvironment(
        name="mbpp_plus",
        title="MBPP+ (EvalPlus)",
        domain="code",
        hub_id="evalplus/mbppplus",
        train_splits=("test",),
        published_rows="378 test",
        license="Apache-2.0",
        gym_license="Apache 2.0",
        schema_source="https://huggingface.co/datasets/evalplus/mbppplus at 9a36f31e81d5e1670b68e6de8ef23da0c4e1abb5 "
        "(task_id, code, prompt, source_file, test_imports, test_list, test: module-level EvalPlus "
        "assertions calling the function by name)",
        needs="numpy in the sandbox runtime (built by `make setup`): EvalPlus's test imports it",
        max_turns=6,
        convert=partial(mbpp, hub_id="evalplus/mbppplus", prefix="mbppplus"),
    ),
    DatasetEnvironment(
        name="livecodebench",
        title="LiveCodeBench (code generation, lite)",
        domain="code",
        hub_id="livecodebench/code_generation_lite",
        hub_subset="release_v6",
        train_splits=("test",),
        published_rows="1,055 test (release_v6; release_v1 400, v2 511, v3 612, v4 713, v5 880)",
        license="cc (as published, no version named)",
        gym_license="TBD",
        schema_source="https://github.com/LiveCodeBench/LiveCodeBench/blob/28fef95ea8c9f7a547c8329f2cd3d32b92c1fa24/"
        "lcb_runner/benchmarks/code_generation.py (question_title, question_content, platform, question_id, "
        "contest_id, contest_date, starter_code, difficulty, public_test_cases, private_test_cases, metadata) "
        "and lcb_runner/evaluation/testing_util.py (functional tests)",
        needs="the Parquet configs of the Hub repo (datasets>=4 runs no loading script); release_v6 is "
        "about 4 GB, mostly private tests",
        max_turns=12,
        convert=livecodebench,
    ),
    DatasetEnvironment(
        name="taco",
        title="TACO",
        domain="code",
        hub_id="BAAI/TACO",
        hub_subset="ALL",
        train_splits=("train",),
        validation_split="test",
        published_rows="25,443 train, 1,000 test",
        license="Apache-2.0",
        gym_license="Apache 2.0",
        schema_source="https://huggingface.co/datasets/BAAI/TACO (config `ALL`: question, solutions, "
        "starter_code, input_output, difficulty, raw_tags, name, source, tags, skill_types, url, Expected "
        "Auxiliary Space, time_limit, date, picture_num, memory_limit, Expected Time Complexity) and "
        "https://github.com/FlagOpen/TACO/blob/245eba3beb2d23a07082307de303de2589e4321a/metrics/testing_util.py",
        needs="about 2.4 GB download (the train split is mostly solutions and tests)",
        max_turns=12,
        convert=taco,
    ),
    DatasetEnvironment(
        name="apps",
        title="APPS",
        domain="code",
        hub_id="codeparrot/apps",
        train_splits=("train",),
        validation_split="test",
        published_rows="5,000 train, 5,000 test",
        license="MIT",
        gym_license="MIT",
        schema_source="https://huggingface.co/datasets/codeparrot/apps (problem_id, question, solutions, "
        "input_output, difficulty, url, starter_code) and https://github.com/hendrycks/apps/blob/"
        "362aedc3c71cd7d9bd2fc96a6c80e11dbc38c7a5/eval/testing_util.py (input_output, call-based tests)",
        needs="datasets>=4 runs no loading script: if the Hub copy has no Parquet files, pass --source a "
        "folder holding the repo's train.jsonl and test.jsonl",
        max_turns=12,
        convert=apps,
    ),
)
