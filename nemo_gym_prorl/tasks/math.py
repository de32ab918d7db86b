# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Math: a problem, an IPython tool in the sandbox, a final answer in `\\boxed{}`.

Checking: a fast exact/numeric comparison first, then `math-verify` (equivalent forms,
fractions, expressions, sets, intervals). A row whose task asks for a form ("simplify to lowest
terms") says `answer_match: exact`, and only the gold's own form is correct; one that asks to
compute a number says `answer_match: number`, and an expression of the right value is not an
answer. math-verify enforces its own time limits with
`signal.alarm`, which only works in a main thread; a checker inside a web server runs in worker
threads and event loops, so we call it with `parsing_timeout=None, timeout_seconds=None` and
enforce the limit from outside: it runs in a separate worker process (inside a sandbox: sympy's
parser evaluates strings, and the strings come from the policy) that is killed and replaced when
a check overruns. A check that overruns is graded 0 with reason `checker_timeout` (a
pathological answer is the policy's doing), not masked.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import sys
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from pydantic import BaseModel, Field

from nemo_gym_prorl.pipeline.handler import InvalidInstanceError
from nemo_gym_prorl.sandbox import Sandbox, SandboxLimits, SandboxProcess, SandboxSpec, open_sandbox
from nemo_gym_prorl.tasks.base import IPYTHON, SUBMIT, EvalOutcome, TaskDomain, strip_thinking

logger = logging.getLogger(__name__)

_WORKER_SOURCE = r"""
import json, sys
from math_verify import parse, verify
from math_verify.parser import ExprExtractionConfig, LatexExtractionConfig
CONFIGS = [LatexExtractionConfig(), ExprExtractionConfig()]
out = sys.stdout
out.write(json.dumps({"ready": True}) + "\n"); out.flush()
for line in sys.stdin:
    try:
        req = json.loads(line)
        gold = parse("$" + req["gold"] + "$", extraction_config=CONFIGS, parsing_timeout=None)
        pred = parse("$" + req["pred"] + "$", extraction_config=CONFIGS, parsing_timeout=None)
        if not gold:
            gold = parse(req["gold"], parsing_timeout=None)
        ok = bool(gold and pred and verify(gold, pred, timeout_seconds=None))
        reply = {"equal": ok, "gold_parsed": [str(x) for x in gold[:1]], "pred_parsed": [str(x) for x in pred[:1]]}
    except Exception as exc:
        reply = {"equal": False, "error": f"{type(exc).__name__}: {exc}"[:500]}
    out.write(json.dumps(reply) + "\n"); out.flush()
"""


# How a row's answer is compared: `equivalent` (the default) accepts any equal value or
# expression; `number` asks for a plain number of that value (a task that asks to compute one:
# restating the sum is not an answer); `exact` asks for the gold's own form (a task whose
# question is the form).
ANSWER_MATCHES = ("equivalent", "number", "exact")


class MathConfig(BaseModel):
    check_timeout_s: float = Field(5.0, gt=0, description="Wall-clock limit of one math-verify check.")
    checker_workers: int = Field(1, ge=1)
    sandboxed_checker: bool = Field(True, description="Run math-verify inside a bubblewrap sandbox.")


def extract_boxed(text: str | None) -> str | None:
    """Content of the last `\\boxed{...}` (or `\\fbox{...}`), braces balanced; None if absent."""
    if not text:
        return None
    text = strip_thinking(text)
    starts = [m.end() for m in re.finditer(r"\\(?:boxed|fbox)\s*\{", text)]
    for start in reversed(starts):
        depth, i = 1, start
        while i < len(text) and depth:
            if text[i] == "{":
                depth += 1
            elif text[i] == "}":
                depth -= 1
            i += 1
        if depth == 0:
            content = text[start : i - 1].strip()
            if content:
                return content
    # `\boxed 5` (no braces) is valid LaTeX for a single token
    m = list(re.finditer(r"\\boxed\s+([^\s$]+)", text))
    return m[-1].group(1) if m else None


_STRIP_RE = re.compile(r"\\left|\\right|\\!|\\,|\\;|\\:|\\ |\$|\s+")


def normalize(ans: str) -> str:
    ans = ans.strip().rstrip(".")
    ans = re.sub(r"\\text\{\s*([^{}]*)\}", r"\1", ans)
    ans = re.sub(r"\\(?:d|t)frac", r"\\frac", ans)
    ans = _STRIP_RE.sub("", ans)
    return ans


def _fraction_parts(ans: str) -> tuple[int, int] | None:
    """`(numerator, denominator)` of an integer or a fraction as written, not reduced; None otherwise."""
    s = normalize(ans).replace("{,}", "").replace(",", "")
    m = re.fullmatch(r"\\frac\{(-?\d+)\}\{(-?\d+)\}", s) or re.fullmatch(r"(-?\d+)/(-?\d+)", s)
    if m:
        return int(m.group(1)), int(m.group(2))
    if re.fullmatch(r"-?\d+", s):
        return int(s), 1
    return None


def _as_number(ans: str) -> Fraction | None:
    parts = _fraction_parts(ans)
    try:
        if parts is not None:
            return Fraction(*parts)
        s = normalize(ans).replace("{,}", "").replace(",", "")
        if re.fullmatch(r"-?\d+\.\d+", s):
            return Fraction(s)
    except (ValueError, ZeroDivisionError):
        return None
    return None


def quick_equal(gold: str, pred: str) -> bool | None:
    """True/False when decidable cheaply (same normal form, or both plain numbers); else None."""
    if normalize(gold) == normalize(pred):
        return True
    g, p = _as_number(gold), _as_number(pred)
    if g is not None and p is not None:
        return g == p
    return None


_PLAIN_NUMBER = re.compile(r"[+-]?(?:\d[\d,]*(?:\.\d*)?|\.\d+)")


def plain_number_equal(gold: str, pred: str) -> bool:
    """`pred` is a plain decimal number (sign, thousands commas, leading zeros and trailing
    decimals allowed, as reasoning-gym scores these tasks) equal to `gold`; an expression of
    the same value (`57 + 87 + 70`) is not."""
    answer = normalize(pred)
    if not _PLAIN_NUMBER.fullmatch(answer):
        return False
    value = _as_number(gold)
    try:
        return value is not None and Fraction(answer.replace(",", "")) == value
    except (ValueError, ZeroDivisionError):
        return False


def exact_form_equal(gold: str, pred: str) -> bool:
    """The gold answer in the gold's own form: for a task that asks for a form ("simplify to
    lowest terms"), an equal value in another form is wrong. `17/293` and `\\frac{17}{293}`
    match; `34/586` does not match `17/293`."""
    if normalize(gold) == normalize(pred):
        return True
    parts = _fraction_parts(gold)
    return parts is not None and parts == _fraction_parts(pred)


class _Worker:
    def __init__(self, sandboxed: bool) -> None:
        self.sandboxed = sandboxed
        self.sandbox: Sandbox | None = None
        self.proc: SandboxProcess | None = None

    async def start(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            return
        self.close()
        argv = [sys.executable, "-I", "-c", _WORKER_SOURCE]
        if self.sandboxed:
            # The grader's own sandbox: it needs math-verify, i.e. the project's runtime. It never
            # runs policy code; the policy's answer reaches it only as a string to parse.
            self.sandbox = open_sandbox(
                SandboxSpec(
                    limits=SandboxLimits(wall_time_s=None, memory_mb=4096, max_processes=32),
                    python_runtime="project",
                )
            )
            self.proc = await self.sandbox.spawn(argv, stdin=True)
        else:
            self.proc = await asyncio.create_subprocess_exec(
                *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.DEVNULL, start_new_session=True,
            )  # fmt: skip
        assert self.proc.stdout is not None
        line = await asyncio.wait_for(self.proc.stdout.readline(), 120)
        if not line:
            raise RuntimeError("math-verify worker exited during start-up")

    async def check(self, gold: str, pred: str, timeout: float) -> dict[str, Any]:
        await self.start()
        assert self.proc is not None and self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write((json.dumps({"gold": gold, "pred": pred}) + "\n").encode())
        await self.proc.stdin.drain()
        line = await asyncio.wait_for(self.proc.stdout.readline(), timeout)
        if not line:
            raise RuntimeError("math-verify worker died")
        return json.loads(line)

    def close(self) -> None:
        if self.sandbox is not None:
            self.sandbox.close()
        elif self.proc is not None and self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
        self.sandbox = None
        self.proc = None

    async def aclose(self) -> None:
        """Close without blocking the event loop (a sandboxed worker's sandbox is torn down in a
        thread), then reap the process, so its transport closes while the event loop runs (a
        transport left to the garbage collector after the loop closed raises at exit)."""
        proc, sandbox = self.proc, self.sandbox
        self.sandbox = None
        if sandbox is not None:
            self.proc = None
            await sandbox.aclose()
        else:
            self.close()
        if proc is not None:
            with contextlib.suppress(ProcessLookupError, TimeoutError):
                await asyncio.wait_for(proc.wait(), 10)


class MathChecker:
    """Equivalence of two answers with a hard wall-clock limit per check."""

    def __init__(self, config: MathConfig | None = None) -> None:
        self.config = config or MathConfig()
        self._free: asyncio.Queue[_Worker] | None = None
        self._workers: list[_Worker] = []

    def _queue(self) -> asyncio.Queue[_Worker]:
        if self._free is None:
            self._free = asyncio.Queue()
            for _ in range(self.config.checker_workers):
                w = _Worker(self.config.sandboxed_checker)
                self._workers.append(w)
                self._free.put_nowait(w)
        return self._free

    async def equivalent(self, gold: str, pred: str) -> tuple[bool, str, dict[str, Any]]:
        """(equal, how, details); `how` in quick | math_verify | checker_timeout | checker_error."""
        quick = quick_equal(gold, pred)
        if quick is not None:
            return quick, "quick", {}
        queue = self._queue()
        worker = await queue.get()
        try:
            reply = await worker.check(gold, pred, self.config.check_timeout_s)
            return bool(reply.get("equal")), "math_verify", reply
        except TimeoutError:
            await worker.aclose()  # killed; the next check starts a fresh worker
            return False, "checker_timeout", {}
        except (RuntimeError, OSError, json.JSONDecodeError) as exc:
            await worker.aclose()
            return False, "checker_error", {"error": str(exc)}
        finally:
            queue.put_nowait(worker)

    async def aclose(self) -> None:
        await asyncio.gather(*(w.aclose() for w in self._workers))


class MathTask(TaskDomain):
    name = "math"
    data_sources = ("prorl_math", "math", "gsm8k")
    default_tools = (IPYTHON, SUBMIT)

    def __init__(self, config: MathConfig | None = None) -> None:
        self.config = config or MathConfig()
        self.checker = MathChecker(self.config)

    def check_row(self, row: Mapping[str, Any]) -> None:
        super().check_row(row)
        gold = row.get("expected_answer", row.get("expected_result"))
        if not isinstance(gold, (str, int, float)) or isinstance(gold, bool) or not str(gold).strip():
            raise InvalidInstanceError(
                "expected_answer", "is missing or empty: a math row needs an answer to grade"
            )
        match = row.get("answer_match", "equivalent")
        if match not in ANSWER_MATCHES:
            raise InvalidInstanceError("answer_match", f"{match!r} is not one of {list(ANSWER_MATCHES)}")

    async def evaluate(
        self, row: Mapping[str, Any], final_text: str | None, artifacts: Mapping[str, Any] | None = None
    ) -> EvalOutcome:
        gold = row.get("expected_answer")
        if gold is None:
            gold = row.get("expected_result")
        if gold is None or not str(gold).strip():
            return EvalOutcome.zero("bad_row", "row has no expected_answer")
        gold = str(gold)
        gold_inner = extract_boxed(gold) or gold
        pred = extract_boxed(final_text)
        if pred is None:
            return EvalOutcome.zero("no_answer", "no \\boxed{} answer in the final message",
                                    report={"extracted_answer": None})  # fmt: skip
        if len(pred) > 2000:
            return EvalOutcome.zero("answer_too_long", f"boxed answer of {len(pred)} characters",
                                    report={"extracted_answer": pred[:200]})  # fmt: skip
        match = row.get("answer_match", "equivalent")
        if match not in ANSWER_MATCHES:
            return EvalOutcome.zero("bad_row", f"answer_match {match!r} is not one of {list(ANSWER_MATCHES)}")
        try:
            if match == "exact":
                equal, how, details = exact_form_equal(gold_inner, pred), "exact", {}
            elif match == "number":
                equal, how, details = plain_number_equal(gold_inner, pred), "number", {}
            else:
                equal, how, details = await self.checker.equivalent(gold_inner, pred)
        except Exception as exc:  # worker could not even start: infrastructure
            return EvalOutcome.infra_failure(f"math checker failed: {exc}", report={"extracted_answer": pred})
        if how == "checker_error":
            return EvalOutcome.infra_failure(str(details.get("error")), report={"extracted_answer": pred})
        reason = "correct" if equal else ("checker_timeout" if how == "checker_timeout" else "wrong_answer")
        return EvalOutcome.from_components(
            {"accuracy": 1.0 if equal else 0.0},
            reason=reason,
            report={"extracted_answer": pred, "expected_answer": gold_inner, "checked_by": how, **details},
        )

    async def aclose(self) -> None:
        await self.checker.aclose()
