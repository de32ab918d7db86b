# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Where the suite's time goes: per test module, its wall time and the CPU seconds the whole
machine was busy meanwhile (from /proc/stat, so the servers, sandboxes, trainers and Ray nodes a
module starts are counted, which a process's own CPU times miss).

`PRORL_TEST_CPU_PROFILE=profile.jsonl pytest` appends one JSON line per module. Only meaningful in
one process (plain `pytest`, not `-n`): nothing else then runs beside the module. On a 2-core
machine, the suite's CPU seconds over two is the least `make test` can take, however its
modules are spread over workers."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

ENV = "PRORL_TEST_CPU_PROFILE"


def busy_cpu_seconds() -> float:
    """CPU seconds the machine has spent on anything but idle and I/O wait since boot."""
    with open("/proc/stat") as stat:
        ticks = [int(field) for field in stat.readline().split()[1:]]
    idle = ticks[3] + ticks[4]
    return (sum(ticks) - idle) / os.sysconf("SC_CLK_TCK")


@dataclass
class _Module:
    path: Path
    tests: int
    started: float
    busy_at_start: float


class CpuProfile:
    """The plugin: `tests/conftest.py` registers it when PRORL_TEST_CPU_PROFILE names a file."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.current: _Module | None = None

    def pytest_runtest_protocol(self, item: pytest.Item) -> None:
        if self.current is None or self.current.path != item.path:
            self._flush()
            self.current = _Module(item.path, 0, time.monotonic(), busy_cpu_seconds())
        self.current.tests += 1

    def pytest_sessionfinish(self) -> None:
        self._flush()

    def _flush(self) -> None:
        module, self.current = self.current, None
        if module is None:
            return
        record = {
            "module": str(module.path),
            "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
            "tests": module.tests,
            "wall_s": round(time.monotonic() - module.started, 1),
            "busy_cpu_s": round(busy_cpu_seconds() - module.busy_at_start, 1),
        }
        with self.out.open("a") as out:
            out.write(json.dumps(record) + "\n")
