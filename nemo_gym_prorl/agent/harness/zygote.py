# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The harness's fork server (`python -m nemo_gym_prorl.agent.harness.zygote`; the service
starts it with `agent.harness.forkserver`): one process per harness that imports the harness's
heavy modules once (mini-swe-agent's litellm costs ~5 s of CPU per import) and forks a child for
each rollout, which starts at once.

It runs where a harness process runs (the same environment and confinement,
`process.harness_plan`). Its standard input carries JSON lines: `{"harness": spec}` first, then
`{"run": id}` (a rollout, whose request the service wrote to `<home>/<id>/request.json`:
`child.run_request`'s) and `{"kill": id}`. It answers JSON lines on standard output:
`{"ready": true}`, then `{"started": id}` and `{"ended": id, "status": code}`. A child reads
and removes its request, writes its `HarnessRun` to `<home>/<id>/run.json` and what the harness
prints to `<home>/<id>/stderr`, in its own home, which the service reads. The server never reads
a request: no rollout's token is in the memory every later child is forked from.

Isolation between rollouts: each child is its own process group (the unit killed) with its own
home, and neither it nor the server may be read by another process of the user (not dumpable:
no /proc/<pid>/mem, environ or ptrace), so a child holds its own rollout's door token and
cannot read a sibling's or the server's. End of input (the service closed it, or died) kills
every child and ends the server.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import selectors
import signal
import sys
from pathlib import Path
from typing import Any

from nemo_gym_prorl.agent.harness.child import build_harness, run_request

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4


def _prctl(option: int, value: int) -> None:
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(option, value)


def _say(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def _child(harness: Any, rollout: str, home: Path) -> None:
    """In the forked child: run one rollout, write its run, exit (never returns)."""
    status = 1
    try:
        os.setsid()  # its own process group: what the service kills
        _prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL))
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        _prctl(PR_SET_DUMPABLE, 0)
        work = home / rollout
        request = json.loads((work / "request.json").read_text())
        (work / "request.json").unlink()
        (work / "tmp").mkdir()
        os.environ.update(HOME=str(work), TMPDIR=str(work / "tmp"))
        os.chdir(work)
        with open(work / "stderr", "wb", buffering=0) as log:
            os.dup2(log.fileno(), 1)
            os.dup2(log.fileno(), 2)
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        run = run_request(harness, request)
        (work / "run.json").write_text(run.model_dump_json())
        status = 0
    except BaseException as exc:  # the harness's own defect: its trace is what the service reports
        import traceback

        with contextlib.suppress(Exception):
            traceback.print_exception(exc)
    finally:
        os._exit(status)


def main() -> int:
    _prctl(PR_SET_DUMPABLE, 0)
    _prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL))
    home = Path(os.environ["HOME"])
    stdin = sys.stdin.buffer
    first = json.loads(stdin.readline())
    harness = build_harness(first["harness"])
    preload = getattr(harness, "preload", None)
    if preload is not None:
        preload()  # the imports every rollout would make: made once, shared by every fork
    children: dict[int, str] = {}  # pid -> rollout id

    wakeup_r, wakeup_w = os.pipe()
    os.set_blocking(wakeup_w, False)
    signal.set_wakeup_fd(wakeup_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so the wakeup fd is written
    selector = selectors.DefaultSelector()
    selector.register(stdin, selectors.EVENT_READ, "input")
    selector.register(wakeup_r, selectors.EVENT_READ, "signal")
    _say({"ready": True})
    buffer = b""
    try:
        while True:
            for key, _ in selector.select():
                if key.data == "signal":
                    os.read(wakeup_r, 4096)
                    _reap(children)
                    continue
                chunk = os.read(stdin.fileno(), 65536)
                if not chunk:
                    return 0  # the service closed its end: nothing more will be asked
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    _handle(json.loads(line), harness, home, children)
    finally:
        for pid in children:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
        _reap(children, block=True)


def _handle(message: dict[str, Any], harness: Any, home: Path, children: dict[int, str]) -> None:
    if "kill" in message:
        for pid, rollout in children.items():
            if rollout == message["kill"]:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pid, signal.SIGKILL)
        return
    rollout = str(message["run"])
    pid = os.fork()
    if pid == 0:
        _child(harness, rollout, home)
    children[pid] = rollout
    _say({"started": rollout})


def _reap(children: dict[int, str], *, block: bool = False) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, 0 if block else os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        rollout = children.pop(pid, None)
        if rollout is not None:
            _say({"ended": rollout, "status": os.waitstatus_to_exitcode(status)})


if __name__ == "__main__":
    sys.exit(main())
