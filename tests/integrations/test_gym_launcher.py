# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""`prorl gym up`'s launcher: what it starts is recorded and stopped exactly, a model it cannot
start is a clear error before anything runs, and the stack is up only once its agent can reach the
model that loaded beside it."""

from __future__ import annotations

import http.server
import json
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from nemo_gym_prorl.integrations.gym.launcher import LaunchError, _wait_backend_admitted, down, up
from nemo_gym_prorl.integrations.gym.processes import (
    GroupRecord,
    record,
    refresh_descendants,
    signals_held,
    spawn,
    stop_group,
)
from nemo_gym_prorl.integrations.gym.stack_state import StackState, load_state, save_state
from nemo_gym_prorl.process_identity import is_running


def test_a_recorded_group_and_its_descendants_are_stopped_and_its_scratch_folder_removed(
    tmp_path: Path,
) -> None:
    # A leader and a child it started: both go when the group is stopped, and so does the folder
    # they used (vLLM's sockets, for the model).
    script = "import subprocess, time; subprocess.Popen(['sleep', '120']); time.sleep(120)"
    log = tmp_path / "logs" / "stand_in.log"
    scratch = tmp_path / "scratch"
    (scratch / "inside").mkdir(parents=True)
    proc = spawn([sys.executable, "-c", script], cwd=tmp_path, env={}, log=log)
    group = record("model", proc, log, scratch_dir=scratch)
    for _ in range(50):
        refresh_descendants(group)
        if group.descendants:
            break
        time.sleep(0.1)
    assert group.descendants, "the child was not recorded"
    said: list[str] = []
    stop_group(group, echo=said.append, grace_s=5)
    proc.wait(timeout=5)
    assert not is_running(group.pid, group.start_ticks)
    assert not [d for d in group.descendants if is_running(d.pid, d.start_ticks)]
    assert said and "stopped model" in said[0]
    assert not scratch.exists() and log.exists()


def test_a_group_whose_recorded_processes_are_gone_is_never_signalled_though_its_number_is_in_use(
    tmp_path: Path,
) -> None:
    # The recorded group's number now names another live group (here a stand-in's, started in a
    # session of its own): stopping the record must leave that group alone.
    log = tmp_path / "logs" / "x.log"
    gone = spawn(["true"], cwd=tmp_path, env={}, log=log)
    dead = record("gym", gone, log)
    gone.wait(timeout=5)
    other = spawn(["sleep", "60"], cwd=tmp_path, env={}, log=log)
    stale = dead.model_copy(update={"pgid": other.pid})
    said: list[str] = []
    try:
        stop_group(stale, echo=said.append, grace_s=1)
        assert other.poll() is None, "a group the launch no longer owns was signalled"
        assert said == [
            f"[gym] gym (pid {gone.pid}, 0 descendant(s) recorded): none of its processes was running"
        ]
    finally:
        stop_group(record("stand-in", other, log), echo=lambda _: None, grace_s=1)
        other.wait(timeout=5)


def test_a_group_recorded_with_a_wall_clock_start_time_is_still_found_and_stopped(tmp_path: Path) -> None:
    # Records written before start ticks held psutil's `create_time`; a stack started by such a
    # version must still be stopped by this one.
    log = tmp_path / "logs" / "x.log"
    proc = spawn(["sleep", "60"], cwd=tmp_path, env={}, log=log)
    current = record("model", proc, log).model_dump()
    legacy = {k: v for k, v in current.items() if k != "start_ticks"}
    legacy["create_time"] = psutil.Process(proc.pid).create_time()
    group = GroupRecord.model_validate(legacy)
    assert group.start_ticks == current["start_ticks"]
    said: list[str] = []
    stop_group(group, echo=said.append, grace_s=5)
    assert proc.wait(timeout=5) == -signal.SIGINT
    assert said == [f"[gym] stopped model (pid {proc.pid}, 0 descendant(s) recorded): it ran 1 process(es)"]


def test_a_process_launched_while_signals_are_held_can_still_be_stopped_by_them(tmp_path: Path) -> None:
    # The launcher holds SIGINT/SIGTERM back between a launch and its record; the child must not
    # inherit that, or SIGTERM would never reach it.
    with signals_held():
        child = spawn(["sleep", "60"], cwd=tmp_path, env={}, log=tmp_path / "sleep.log")
    child.terminate()
    assert child.wait(timeout=5) == -signal.SIGTERM


def test_down_on_a_start_that_left_nothing_running_says_so_and_forgets_it(tmp_path: Path) -> None:
    log = tmp_path / "logs" / "x.log"
    gone = spawn(["true"], cwd=tmp_path, env={}, log=log)
    group = record("gym", gone, log)
    gone.wait(timeout=5)
    state = StackState(
        started_at=time.time(), workdir=str(tmp_path), head_url="http://127.0.0.1:1", config_paths=[],
        model_url="http://127.0.0.1:2", model_name="m", groups=[group], ready=False,
    )  # fmt: skip
    save_state(tmp_path, state)
    said: list[str] = []
    assert down(tmp_path, echo=said.append)
    assert said == [f"[gym] nothing left running of the stack recorded in {tmp_path / 'state.json'}"]
    assert load_state(tmp_path) is None


def test_serve_model_without_the_embedded_backend_names_the_setup_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PRORL_HOME", str(tmp_path / "empty-home"))
    with pytest.raises(LaunchError, match="prorl model setup"):
        up(["math"], state_dir=tmp_path / "state", serve_model=True, echo=lambda _: None)
    # Nothing was started, so nothing is recorded as up.
    assert not (tmp_path / "state" / "state.json").exists()


def test_no_model_at_all_is_refused(tmp_path: Path) -> None:
    with pytest.raises(LaunchError, match="--model-url"):
        up(["math"], state_dir=tmp_path / "state", echo=lambda _: None)


class _Backends(http.server.BaseHTTPRequestHandler):
    """An agent's `/v1/backends`: its backend unhealthy for the first `unhealthy` answers."""

    unhealthy = 0
    answered = 0

    def do_GET(self) -> None:
        cls = type(self)
        cls.answered += 1
        healthy = cls.answered > cls.unhealthy
        body = json.dumps({"backends": [{"url": "http://127.0.0.1:1/v1", "healthy": healthy}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def agent() -> Iterator[tuple[type[_Backends], str]]:
    handler = type("Backends", (_Backends,), {"answered": 0, "unhealthy": 0})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield handler, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_the_stack_is_up_once_the_agent_admits_the_model_that_started_beside_it(
    agent: tuple[type[_Backends], str],
) -> None:
    # The model came up after the agent: its pool admits it at a later probe.
    backends, url = agent
    backends.unhealthy = 3
    _wait_backend_admitted(url, timeout_s=30)
    assert backends.answered == 4


def test_an_agent_that_never_admits_the_model_is_a_launch_error(agent: tuple[type[_Backends], str]) -> None:
    backends, url = agent
    backends.unhealthy = 10**6
    with pytest.raises(LaunchError, match="admitted no model backend"):
        _wait_backend_admitted(url, timeout_s=1.5)
