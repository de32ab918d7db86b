# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""A `prorl gym up` that does not finish stops what it started, and `prorl gym down` always finds it.

The real start (`gym env start`: Gym's head, Ray's daemons and workers, the agent, its environment
server, the math resources server, Gym's model server) runs through the CLI in a subprocess,
against a model that never answers: a socket that takes connections and never replies, so the
stack never becomes ready. While the start waits, the test records every process in its tree
(pid and start time). Then the start is cut short three ways: SIGTERM, its own readiness
timeout, and SIGKILL of the launcher itself (which can stop nothing, so `down` must). Each time,
no process the start made may be left running, and `down` afterwards finds nothing left to stop.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import psutil
import pytest
from support.processes import alive, identify, wait_dead

from nemo_gym_prorl.assets import project_root
from nemo_gym_prorl.integrations.gym.launcher import down, free_port, load_state

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

WAIT_S = 300  # generous: only against a hang (Ray and five servers start on two loaded cores)


@pytest.fixture
def silent_model() -> Iterator[str]:
    """An OpenAI-compatible URL whose server never answers: connections are taken (the kernel
    queues them) and never replied to."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(256)
        yield f"http://127.0.0.1:{server.getsockname()[1]}"


class Start:
    """`prorl gym up --domain math` in a session of its own, with every process seen in its tree."""

    def __init__(self, work: Path, model_url: str, ready_timeout_s: float) -> None:
        self.state_dir = work / "state"
        self.head_url = f"http://127.0.0.1:{free_port()}"
        self.log = work / "up.log"
        cmd = [sys.executable, "-m", "nemo_gym_prorl.cli", "gym", "up", "--domain", "math",
               "--model-url", model_url, "--model-name", "silent", "--state-dir", str(self.state_dir),
               "--head-port", self.head_url.rsplit(":", 1)[1], "--ready-timeout", str(ready_timeout_s)]  # fmt: skip
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(
                cmd, cwd=project_root(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        self.seen: dict[tuple[int, int], str] = {}  # (pid, start ticks) -> name

    def look(self) -> None:
        """Add what runs in the start's tree now."""
        try:
            tree = psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.Error:
            return
        for process in tree:
            with contextlib.suppress(psutil.Error):
                if (ident := identify(process.pid)) is not None:
                    self.seen[ident] = process.name()

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def report(self) -> str:
        """The start's own output, then the end of Gym's log (where a stack that hangs says why)."""
        gym_log = self.state_dir / "logs" / "gym.log"
        tail = gym_log.read_text(errors="replace")[-6000:] if gym_log.exists() else "(no gym.log)"
        return f"{self.output()}\n--- end of gym.log ---\n{tail}"

    def wait_until_waiting(self) -> None:
        """Until the stack runs (Ray's raylet among the recorded processes) and its head server
        answers: the start is in its readiness wait."""
        deadline = time.monotonic() + WAIT_S
        while not (self._raylet_recorded() and self._head_answers()):
            assert self.proc.poll() is None, f"the start ended ({self.proc.returncode}):\n{self.report()}"
            assert time.monotonic() < deadline, (
                f"the stack did not start in {WAIT_S}s (raylet recorded: {self._raylet_recorded()}, "
                f"head answers: {self._head_answers()}):\n{self.report()}"
            )
            self.look()
            time.sleep(0.5)
        self.look()

    def finish(self) -> int:
        deadline = time.monotonic() + WAIT_S
        while self.proc.poll() is None:
            assert time.monotonic() < deadline, f"the start did not end in {WAIT_S}s:\n{self.report()}"
            self.look()
            time.sleep(0.2)
        return self.proc.returncode

    def wait_recorded(self) -> None:
        """Until the record names every process running in the start's tree (it is written as
        processes appear, between the wait's probes)."""
        deadline = time.monotonic() + 30
        while True:
            self.look()
            unrecorded = set(self.running()) - self.recorded()
            if not unrecorded:
                return
            assert time.monotonic() < deadline, f"never recorded: {[self.seen[p] for p in unrecorded]}"
            time.sleep(0.5)

    def running(self) -> list[tuple[int, int]]:
        return [proc for proc in self.seen if alive(*proc)]

    def recorded(self) -> set[tuple[int, int]]:
        state = load_state(self.state_dir)
        return {proc for group in state.groups for proc in group.recorded()} if state else set()

    def _raylet_recorded(self) -> bool:
        state = load_state(self.state_dir)
        names = [d.name for group in (state.groups if state else []) for d in group.descendants]
        return "raylet" in names

    def _head_answers(self) -> bool:
        try:
            httpx.get(f"{self.head_url}/readyz", timeout=2)
            return True
        except httpx.HTTPError:
            return False


@pytest.fixture
def start(tmp_path: Path, silent_model: str) -> Iterator[Callable[..., Start]]:
    starts: list[Start] = []

    def make(ready_timeout_s: float = WAIT_S) -> Start:
        starts.append(Start(tmp_path, silent_model, ready_timeout_s))
        return starts[-1]

    yield make
    # After a failure only: nothing this test's start made may outlive it. Only processes seen in
    # its tree (pid and start time) are signalled.
    for made in starts:
        if made.proc.poll() is None:
            made.proc.kill()
            made.proc.wait()
        for pid, _ in made.running():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def assert_down_finds_nothing_to_stop(state_dir: Path) -> None:
    said: list[str] = []
    down(state_dir, echo=said.append)
    assert len(said) == 1 and "nothing" in said[0], said
    assert load_state(state_dir) is None


def test_sigterm_during_the_readiness_wait_stops_every_process_the_start_launched(start) -> None:
    up = start()
    up.wait_until_waiting()
    assert len(up.seen) >= 10, f"the stack was not running: {sorted(up.seen.values())}"

    up.proc.send_signal(signal.SIGTERM)

    assert up.finish() == 128 + signal.SIGTERM, up.output()
    assert "up stopped by SIGTERM" in up.output()
    assert not wait_dead(up.seen), f"left running: {[up.seen[p] for p in up.running()]}"
    assert_down_finds_nothing_to_stop(up.state_dir)


def test_a_readiness_timeout_stops_every_process_the_start_launched(start) -> None:
    up = start(ready_timeout_s=30)

    assert up.finish() == 1, up.output()
    assert "not ready after 30s" in up.output()
    assert "raylet" in up.seen.values(), "the stack had not started when the time ran out"
    assert not wait_dead(up.seen), f"left running: {[up.seen[p] for p in up.running()]}"
    assert_down_finds_nothing_to_stop(up.state_dir)


def test_a_start_killed_outright_leaves_down_the_record_of_everything_it_launched(start) -> None:
    up = start()
    up.wait_until_waiting()
    up.wait_recorded()  # on disk: every process the start made, by pid and start time

    up.proc.kill()  # no handler runs: the stack keeps running, orphaned
    up.proc.wait()
    assert up.running(), "the stack should outlive a launcher killed outright"

    said: list[str] = []
    assert down(up.state_dir, echo=said.append)
    assert "stopping a start that did not finish" in said[0]
    assert not wait_dead(up.seen), f"left running: {[up.seen[p] for p in up.running()]}"
    assert_down_finds_nothing_to_stop(up.state_dir)
