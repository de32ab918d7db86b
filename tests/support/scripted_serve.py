# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""A real `prorl serve` in a process of its own, serving the tests' scripted sandbox handler
(test support: the child imports it from tests/), for tests that kill and restart the service."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from nemo_gym_prorl.cli.serve import READY_PREFIX

TESTS = Path(__file__).resolve().parents[1]
SCRIPTED_BOX = [
    "tasks=none",
    "+tasks.box.handler=support.scripted_stages:build_sandbox_scripted",
    "server.log_level=warning",
    "service.require_backend=false",
    "llm.health_path=null",
]


def start_scripted_serve(
    tmp_path: Path, overrides: list[str], *, ready_s: float = 60.0
) -> tuple[subprocess.Popen[str], str]:
    """The service with `SCRIPTED_BOX` and `overrides`, its sandboxes under `tmp_path`; returns
    once it listens, with its URL."""
    env = {**os.environ, "PRORL_SANDBOX_ROOT": str(tmp_path / "sandboxes"), "PYTHONPATH": str(TESTS)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "nemo_gym_prorl.cli.serve", *SCRIPTED_BOX, *overrides],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=TESTS.parent,
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + ready_s
    for line in proc.stdout:
        if line.startswith(READY_PREFIX):
            return proc, line[len(READY_PREFIX) :].split()[0]
        assert time.monotonic() < deadline
    proc.kill()
    raise AssertionError(f"service did not start (exit {proc.wait()})")
