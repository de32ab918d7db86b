# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Ctrl-C (SIGINT) or SIGTERM while `prorl demo` collects rollouts stops it in order.

The demo runs through its CLI entry in a subprocess, over a stand-in stack (`stand_in_stack.py`:
`prorl serve` with scripted handlers and real bubblewrap sandboxes, started and recorded as the
launcher records `gym env start`). It is signalled once its collection has judged the quick
groups and the sandboxes hold their long-lived processes. It must exit with 128 + the signal,
leave none of the processes it started (every descendant, looked up by pid and start time
before the signal), say it was interrupted, and keep the judged groups.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest
from support.processes import Proc, alive, identify, wait_dead

pytestmark = [pytest.mark.bwrap, pytest.mark.slow, pytest.mark.timeout(300)]

DRIVER = Path(__file__).with_name("stand_in_stack.py")
TESTS_DIR = Path(__file__).resolve().parents[1]
STEM_SANDBOXES = 4  # two STEM prompts x two samples, each with a live sandbox
MATH_GROUPS = 2


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def wait_for(predicate: Callable[[], bool], proc: subprocess.Popen[bytes], log: Path, what: str) -> None:
    deadline = time.monotonic() + 120  # generous: only against a hang
    while not predicate():
        assert proc.poll() is None, f"the demo exited ({proc.returncode}) before {what}:\n{log.read_text()}"
        assert time.monotonic() < deadline, f"no {what} after 120s:\n{log.read_text()}"
        time.sleep(0.1)


def process_tree(pid: int) -> list[tuple[int, int]]:
    root = psutil.Process(pid)
    return [ident for p in [root, *root.children(recursive=True)] if (ident := identify(p.pid)) is not None]


class Demo:
    """The demo collecting over the stand-in stack, with what it started looked up."""

    def __init__(self, work: Path, *, sigint_ignored: bool) -> None:
        self.work = work
        self.log = work / "demo.log"
        self.out = work / "out"
        env = {
            **os.environ,
            "PYTHONPATH": str(TESTS_DIR),
            "PRORL_OUTPUT_DIR": str(self.out),
            "PRORL_SANDBOX_ROOT": str(work / "sandboxes"),
        }
        # `cmd &` in a script (or an agent's shell) starts it with SIGINT ignored.
        preexec = (lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if sigint_ignored else None
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, str(DRIVER), str(work)], cwd=work, env=env, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=preexec,
            )  # fmt: skip
        self.started: list[tuple[int, float]] = []

    def wait_collecting(self) -> None:
        """Until the math groups are judged and every STEM sandbox holds its process; then
        record every process the demo started."""
        events, sandboxes = self.work / "events.jsonl", self.work / "sandboxes.jsonl"
        wait_for(lambda: len(lines(events)) >= MATH_GROUPS, self.proc, self.log, "judged math groups")
        wait_for(lambda: len(lines(sandboxes)) >= STEM_SANDBOXES, self.proc, self.log, "STEM sandboxes")
        self.started = process_tree(self.proc.pid)
        state = json.loads((self.work / "state" / "state.json").read_text())
        pids = {pid for pid, _ in self.started}
        assert {g["pid"] for g in state["groups"]} <= pids, "the stand-in stack runs under the demo"
        assert {p for s in lines(sandboxes) for p in s["pids"]} <= pids, "so do the sandboxes' processes"

    def signal(self, sig: int) -> None:
        os.kill(self.proc.pid, sig)

    def wait_log(self, text: str) -> None:
        wait_for(lambda: text in self.log.read_text(), self.proc, self.log, repr(text))

    def finish(self) -> tuple[int, str]:
        code = self.proc.wait(timeout=240)  # generous: only against a hang
        return code, self.log.read_text()

    def survivors(self) -> list[Proc]:
        """What it started and is still running (the last SIGKILLs may still be landing)."""
        return wait_dead(self.started)

    def kill_everything(self) -> None:
        """After a failure only: nothing the demo left behind may outlive the test."""
        try:
            now = process_tree(self.proc.pid) if self.proc.poll() is None else []
        except psutil.Error:
            now = []
        for pid, ticks in {*self.started, *now}:
            if alive(pid, ticks):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        self.proc.wait()


@pytest.fixture
def start_demo(tmp_path: Path):
    demos: list[Demo] = []

    def start(*, sigint_ignored: bool = False) -> Demo:
        demos.append(Demo(tmp_path, sigint_ignored=sigint_ignored))
        return demos[-1]

    yield start
    for demo in demos:
        if demo.proc.poll() is None or any(alive(*p) for p in demo.started):
            demo.kill_everything()


def assert_stopped_in_order(demo: Demo, code: int, output: str, sig: signal.Signals) -> None:
    assert code == 128 + sig, output
    left = demo.survivors()
    assert left == [], f"left running: {left}\n{output}"
    assert not (demo.work / "state" / "state.json").exists(), "`prorl gym down` removes the state it stopped"
    partial = demo.out / "demo" / "partial_groups.jsonl"
    assert f"interrupted by {sig.name}: everything the demo started is stopped" in output
    assert str(partial) in output
    kept = {event["group"]["group_id"] for event in lines(partial)}
    taken = {event["group_id"] for event in lines(demo.work / "events.jsonl")}
    assert kept == taken and len(kept) == MATH_GROUPS


@pytest.mark.parametrize(
    ("sig", "sigint_ignored"),
    [
        pytest.param(signal.SIGINT, True, id="sigint-even-when-started-with-sigint-ignored"),
        pytest.param(signal.SIGTERM, False, id="sigterm-exits-143"),
    ],
)
def test_a_signal_stops_the_demo_in_order(start_demo, sig: signal.Signals, sigint_ignored: bool) -> None:
    demo = start_demo(sigint_ignored=sigint_ignored)
    demo.wait_collecting()

    demo.signal(sig)
    code, output = demo.finish()

    assert_stopped_in_order(demo, code, output, sig)


def test_a_second_ctrl_c_during_the_shutdown_does_not_cut_it_short(start_demo) -> None:
    demo = start_demo()
    demo.wait_collecting()

    demo.signal(signal.SIGINT)
    demo.wait_log("SIGINT: stopping everything the demo started")
    demo.signal(signal.SIGINT)
    demo.signal(signal.SIGINT)
    code, output = demo.finish()

    assert_stopped_in_order(demo, code, output, signal.SIGINT)
