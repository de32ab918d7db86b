# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The security suite's ledger and its printed report.

Every attack test records one line (what was tried, whether it was contained, the figure that
shows it); at the end of the session the report is printed in the terminal summary, so CI logs
show it whether the tests passed or not. A test asserts containment itself; the ledger only
reports what the assertions checked.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from nemo_gym_prorl.sandbox.limits import _pids_parent


@dataclass
class Attack:
    name: str
    contained: bool
    figure: str


@dataclass
class Ledger:
    attacks: list[Attack] = field(default_factory=list)
    figures: dict[str, str] = field(default_factory=dict)

    def record(self, name: str, contained: bool, figure: str) -> None:
        self.attacks.append(Attack(name, contained, figure))


_LEDGER = Ledger()


@pytest.fixture(scope="session")
def ledger() -> Ledger:
    return _LEDGER


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _LEDGER.attacks:
        return
    write = terminalreporter.write_line
    terminalreporter.section("sandbox security: attacks from inside RUN sandboxes")
    width = max(len(a.name) for a in _LEDGER.attacks)
    for attack in _LEDGER.attacks:
        verdict = "contained" if attack.contained else "NOT CONTAINED"
        write(f"  {attack.name:<{width}}  {verdict:<13}  {attack.figure}")
    contained = sum(a.contained for a in _LEDGER.attacks)
    write(f"  summary: {contained}/{len(_LEDGER.attacks)} attacks contained")
    for key, value in _LEDGER.figures.items():
        write(f"  {key}: {value}")


@dataclass
class Service:
    url: str
    port: int
    token: str
    process: subprocess.Popen[str]

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {self.token}"}, timeout=60)


READY_PREFIX = "prorl serve: listening on "


@pytest.fixture(scope="session")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """A real `prorl serve` (its own process, a real port, an API token) running sandboxed
    scripted rollouts: the neighbours whose rollouts must complete while attacks run."""
    token = "prorl-secret-" + os.urandom(12).hex()
    root = tmp_path_factory.mktemp("service-sandboxes")
    overrides = [
        "tasks=none",
        "+tasks.box.handler=support.scripted_stages:build_sandbox_scripted",
        "server.port=0",
        "server.log_level=warning",
        "service.require_backend=false",
        "llm.health_path=null",
    ]
    tests_dir = str(Path(__file__).resolve().parents[1])  # the scripted handler lives in tests/support
    env = {**os.environ, "PRORL_SANDBOX_ROOT": str(root), "PRORL_API_TOKEN": token, "PYTHONPATH": tests_dir}
    proc = subprocess.Popen(
        [sys.executable, "-m", "nemo_gym_prorl.cli", "serve", *overrides],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=Path(__file__).resolve().parents[2],
        start_new_session=True,
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + 120
    url = None
    for line in proc.stdout:
        if line.startswith(READY_PREFIX):
            url = line[len(READY_PREFIX) :].split()[0]
            break
        if time.monotonic() > deadline:
            break
    if url is None:
        proc.kill()
        raise AssertionError(f"the service did not start (exit {proc.wait()})")
    try:
        yield Service(url=url, port=int(url.rsplit(":", 1)[1].strip("/")), token=token, process=proc)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def process_limit_mechanism() -> str:
    if _pids_parent() is not None:
        return "pids cgroup"
    return "RLIMIT_NPROC (unprivileged uid)" if os.geteuid() != 0 else "none"
