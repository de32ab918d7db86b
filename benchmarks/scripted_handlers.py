# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The scripted rollout handlers some benchmarks drive the real pipeline with. They are test
support (`tests/support/`), not product code: this puts that package on the import path, for
this process and for the `prorl serve` a benchmark starts (`subprocess_env`)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

TESTS_DIR = Path(__file__).resolve().parents[1] / "tests"
if str(TESTS_DIR) not in sys.path:
    sys.path.insert(0, str(TESTS_DIR))

from support.scripted_groups import GroupScriptedHandler  # noqa: E402
from support.scripted_stages import SCRIPTED_TASKS, SandboxScriptedHandler, ScriptedHandler  # noqa: E402


def subprocess_env(env: Mapping[str, str]) -> dict[str, str]:
    """`env` with tests/ on PYTHONPATH, so `SCRIPTED_TASKS` resolves in a child process."""
    paths = [str(TESTS_DIR), *filter(None, [env.get("PYTHONPATH")])]
    return {**env, "PYTHONPATH": os.pathsep.join(paths)}


def start_service(overrides: list[str]) -> tuple[subprocess.Popen[str], str]:
    """`prorl serve OVERRIDES` in a child process, no token: (the process, its URL) once it
    listens. The caller ends it with `stop_service`."""
    from nemo_gym_prorl.cli.serve import READY_PREFIX

    proc = subprocess.Popen(
        [sys.executable, "-m", "nemo_gym_prorl.cli.serve", *overrides],
        stdout=subprocess.PIPE,
        text=True,
        # A program of its own, as a deployed service is, not one sharing its session's CPU
        # share (the kernel's autogroup) with the load generator and the simulated backends.
        start_new_session=True,
        env=subprocess_env({**os.environ, "PRORL_API_TOKEN": ""}),
    )
    assert proc.stdout is not None
    try:
        for line in proc.stdout:
            if line.startswith(READY_PREFIX):
                return proc, line[len(READY_PREFIX) :].split()[0]
    except BaseException:  # stopped (SIGTERM, Ctrl-C) while it starts: the caller never gets it
        stop_service(proc)
        raise
    raise RuntimeError(f"prorl serve did not start (exit {proc.wait()})")


def stop_service(proc: subprocess.Popen[str], timeout_s: float = 120.0) -> None:
    """SIGTERM (the service cancels and releases every rollout), then SIGKILL past `timeout_s`."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def start_scripted_service(workers: int = 16) -> tuple[subprocess.Popen[str], str]:
    """`prorl serve` over the scripted tasks, on a free loopback port."""
    return start_service([
        *SCRIPTED_TASKS, "server.port=0", "server.log_level=warning", "service.require_backend=false",
        "llm.health_path=null", f"pipeline.init_workers={workers}", f"pipeline.run_workers={workers}",
        f"pipeline.eval_workers={workers}",
    ])  # fmt: skip


__all__ = [
    "SCRIPTED_TASKS",
    "GroupScriptedHandler",
    "SandboxScriptedHandler",
    "ScriptedHandler",
    "start_scripted_service",
    "start_service",
    "stop_service",
    "subprocess_env",
]
