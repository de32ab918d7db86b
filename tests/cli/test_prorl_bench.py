# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""`prorl bench`: a benchmark stopped by a signal stops what it started."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.processes import alive

pytestmark = [
    pytest.mark.bwrap,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed"),
]


def children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(c) for c in (task / "children").read_text().split()]
    return found


@pytest.mark.parametrize("after_s", [0.0, 3.0], ids=["while-its-service-starts", "with-rollouts-under-way"])
def test_sigterm_to_a_running_load_benchmark_stops_its_service_and_removes_its_directory(
    after_s: float,
) -> None:
    bench = subprocess.Popen(
        [sys.executable, "-m", "nemo_gym_prorl.cli", "bench", "load", "--", "--shell", "8", "--ipython"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        deadline, service = time.monotonic() + 120, None
        while service is None:
            assert bench.poll() is None and time.monotonic() < deadline, "the benchmark started no service"
            for child in children(bench.pid):
                argv = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
                if b"nemo_gym_prorl.cli.serve" in argv:
                    root = next(a for a in argv if a.startswith(b"+sandbox.root_dir="))
                    service, workdir = child, Path(root.split(b"=", 1)[1].decode()).parent
            time.sleep(0.2)
        time.sleep(after_s)
        bench.send_signal(signal.SIGTERM)  # to the benchmark alone, as `kill PID` does
        _, err = bench.communicate(timeout=120)
        assert bench.returncode == 128 + signal.SIGTERM and "stopped by SIGTERM" in err, err[-2000:]
        assert not alive(service), "the service it started is stopped"
        assert not workdir.exists(), "its directory is removed"
    finally:
        if bench.poll() is None:
            os.killpg(bench.pid, signal.SIGKILL)
            bench.wait()
