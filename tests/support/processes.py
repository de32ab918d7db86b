# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Checks that processes are gone (tests only): "nothing the project started is left running"."""

from __future__ import annotations

import time
from collections.abc import Iterable

import psutil


def alive(pid: int) -> bool:
    """True unless the process is gone or a zombie (a zombie runs nothing)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def wait_dead(pids: Iterable[int], within_s: float = 20.0) -> list[int]:
    """Wait until none of `pids` runs; returns those still running after `within_s`."""
    pending = list(pids)
    deadline = time.monotonic() + within_s
    while pending and time.monotonic() < deadline:
        pending = [p for p in pending if alive(p)]
        if pending:
            time.sleep(0.2)
    return [p for p in pending if alive(p)]
