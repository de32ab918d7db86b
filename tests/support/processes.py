# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Checks that processes are gone (tests only): "nothing the project started is left running".

A process is a pid, or (pid, psutil create_time) to follow that very process and not a later
one the system gave the same pid."""

from __future__ import annotations

import time
from collections.abc import Iterable

import psutil

Proc = int | tuple[int, float]


def alive(pid: int, create_time: float | None = None) -> bool:
    """True unless the process is gone or a zombie (a zombie runs nothing)."""
    try:
        process = psutil.Process(pid)
        if create_time is not None and process.create_time() != create_time:
            return False
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _running(proc: Proc) -> bool:
    return alive(*proc) if isinstance(proc, tuple) else alive(proc)


def wait_dead(pids: Iterable[Proc], within_s: float = 20.0) -> list[Proc]:
    """Wait until none of `pids` runs; returns those still running after `within_s`."""
    pending = list(pids)
    deadline = time.monotonic() + within_s
    while pending and time.monotonic() < deadline:
        pending = [p for p in pending if _running(p)]
        if pending:
            time.sleep(0.2)
    return [p for p in pending if _running(p)]
