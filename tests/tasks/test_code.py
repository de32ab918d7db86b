# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Code evaluation: all 164 HumanEval canonical solutions pass and their mutants fail; each test
is isolated from the others; runaway programs are contained."""

import asyncio

import pytest

from nemo_gym_prorl.datasets.sources import humaneval_problems, humaneval_rows
from nemo_gym_prorl.tasks.code import CodeConfig, CodeTask, extract_code, outputs_match
from nemo_gym_prorl.tasks.runner import ForkRunner, RunRequest, default_runner_spec

pytestmark = pytest.mark.bwrap


def test_extract_code_and_output_matching():
    assert extract_code("x\n```python\na=1\n```\n```py\nb=2\n```") == "b=2\n"
    assert extract_code("no code") is None
    assert outputs_match("1 2\n3\n\n", "1  2\n3") and outputs_match("0.3333333", "0.33333333")
    assert not outputs_match("1 2", "1 3")


async def test_all_humaneval_canonical_pass_and_mutants_fail():
    problems = {p["task_id"]: p for p in humaneval_problems()}
    rows = humaneval_rows()
    assert len(rows) == 164
    task = CodeTask(CodeConfig(runners=2))
    try:

        def answer(row, body):
            return f"```python\n{problems[row['task_id']]['prompt']}{body}```"

        good = await asyncio.gather(
            *(task.evaluate(r, answer(r, problems[r["task_id"]]["canonical_solution"])) for r in rows)
        )
        assert [r["task_id"] for r, o in zip(rows, good, strict=True) if o.reward != 1.0] == []
        bad = await asyncio.gather(*(task.evaluate(r, answer(r, "    return None\n")) for r in rows))
        assert [r["task_id"] for r, o in zip(rows, bad, strict=True) if o.reward != 0.0] == []
        # a completion that restates the whole function (signature included) also works
        p = problems["HumanEval/2"]
        full = f"```python\ndef {p['entry_point']}(number: float) -> float:\n    return number % 1.0\n```"
        assert (await task.evaluate(rows[2], full)).reward == 1.0
    finally:
        await task.aclose()


async def test_tests_are_isolated_and_limited():
    runner = ForkRunner()
    try:
        leave = ("import os, subprocess, sys\nopen('/tmp/leftover', 'w').write('x')\nopen('here', 'w').write('x')\n"
                 "if os.fork() == 0:\n    os.setsid()\n    import time; time.sleep(300)\nprint('left things behind')")  # fmt: skip
        out = await runner.run(RunRequest(code=leave, timeout_s=5))
        assert out.exit_code == 0 and "left things behind" in out.stdout and not out.timed_out
        look = ("import os\nprint(os.path.exists('/tmp/leftover'), os.listdir('.'))\n"
                "print(sum(1 for p in os.listdir('/proc') if p.isdigit()))")  # fmt: skip
        out = await runner.run(RunRequest(code=look))
        lines = out.stdout.splitlines()
        assert lines[0] == "False []", out.stdout  # files of the previous test are gone
        assert int(lines[1]) <= 4, out.stdout  # its orphan is gone: only bwrap init, runner, this test
        out = await runner.run(RunRequest(code="while True: pass", timeout_s=1))
        assert out.timed_out and out.error_type == "timeout"
        out = await runner.run(RunRequest(code="x = bytearray(3 * 1024**3)", memory_mb=512))
        assert out.error_type == "memory_limit"
        out = await runner.run(
            RunRequest(code="import sys\nwhile True: sys.stdout.write('y' * 4096)", max_output_bytes=10000)
        )
        assert out.error_type == "output_limit" and len(out.stdout) <= 10000
        out = await runner.run(RunRequest(code="print(input()[::-1])", stdin="abc\n"))
        assert out.ok and out.stdout == "cba\n"
    finally:
        await runner.aclose()


async def test_wiping_between_tests_leaves_read_only_binds_under_tmp_alone(tmp_path):
    """A checkout (and its venv) under /tmp is bound read-only inside the runner's /tmp. The wipe
    after each test removes what the test wrote, even beside such a bind, but never walks into
    the bind: it could delete nothing there, and walking a venv took longer than the test."""
    bound = tmp_path / "checkout"
    (bound / "pkg").mkdir(parents=True)
    (bound / "pkg" / "module.py").write_text("x = 1\n")
    spec = default_runner_spec().model_copy(update={"ro_binds": [bound]})
    runner = ForkRunner(spec)
    try:
        write = (f"import os\nopen('/tmp/mine', 'w').write('x')\nopen('{tmp_path}/beside', 'w').write('x')\n"
                 f"os.makedirs('{tmp_path}/newdir/sub')\nprint(os.listdir('{bound}/pkg'))")  # fmt: skip
        out = await runner.run(RunRequest(code=write))
        assert out.ok and "module.py" in out.stdout, out
        look = (f"import os\nprint('mine' in os.listdir('/tmp'), sorted(os.listdir('{tmp_path}')),"
                f" os.listdir('{bound}/pkg'))")  # fmt: skip
        out = await runner.run(RunRequest(code=look))
        assert out.stdout.strip() == "False ['checkout'] ['module.py']", out
        assert (bound / "pkg" / "module.py").read_text() == "x = 1\n"
    finally:
        await runner.aclose()


def test_wipe_skips_kept_mount_points_and_removes_the_rest(tmp_path):
    from nemo_gym_prorl.tasks import _forkrunner

    (tmp_path / "outer" / "mount").mkdir(parents=True)
    (tmp_path / "outer" / "mount" / "kept.py").write_text("x")
    (tmp_path / "outer" / "written").write_text("x")
    (tmp_path / "deep" / "er").mkdir(parents=True)
    (tmp_path / "deep" / "er" / "f").write_text("x")
    (tmp_path / "link").symlink_to(tmp_path / "outer" / "mount")
    _forkrunner._wipe(str(tmp_path), frozenset({str(tmp_path / "outer" / "mount")}))
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")) == [
        "outer", "outer/mount", "outer/mount/kept.py",
    ]  # fmt: skip
