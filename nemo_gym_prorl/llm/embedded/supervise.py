# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""A tiny supervisor between prorl and a model server process tree (stdlib only).

Why not just PR_SET_PDEATHSIG on the server? vLLM forks engine/worker processes, and a
parent-death signal reaches only the direct child, so grandchildren would be orphaned; and a
PDEATHSIG fires when the *thread* that forked exits, which kills servers started from worker
threads. This supervisor leads its own process group (prorl starts it in a new session), runs
the server in that group, and when its parent goes away (it gets re-parented) or it is asked
to stop, it signals the whole group: SIGTERM, then SIGKILL after a grace period.

usage: python supervise.py PARENT_PID GRACE_S -- CMD...
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time


def _kill_group(grace_s: float, child: subprocess.Popen[bytes]) -> None:
    pgid = os.getpgrp()
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # we are in the group we signal
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and child.poll() is None:
        time.sleep(0.1)
    try:
        os.killpg(pgid, signal.SIGKILL)  # also ends this process: nothing of the tree survives
    except ProcessLookupError:
        pass


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        print(__doc__, file=sys.stderr)
        return 2
    parent, grace_s, cmd = int(argv[0]), float(argv[1]), argv[3:]
    child = subprocess.Popen(cmd)
    stop = False

    def on_signal(signum: int, frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    while True:
        code = child.poll()
        if code is not None:
            return code
        if stop or os.getppid() != parent:
            _kill_group(grace_s, child)
            return 143
        time.sleep(0.25)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
