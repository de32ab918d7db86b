# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Checks that processes are gone (tests only): "nothing the project started is left running".

A process is a pid, or (pid, start ticks since boot) to follow that very process and not a later
one the system gave the same pid (`identify`)."""

from __future__ import annotations

import time
from collections.abc import Iterable

import psutil

from nemo_gym_prorl.process_identity import start_ticks

Proc = int | tuple[int, int]


def identify(pid: int) -> tuple[int, int] | None:
    """The running process `pid` as (pid, start ticks), or None if it is gone."""
    ticks = start_ticks(pid, exiting=True)
    return None if ticks is None else (pid, ticks)


def alive(pid: int, ticks: int | None = None) -> bool:
    """True unless the process is gone or a zombie (a zombie runs nothing); with `ticks`, only
    while `pid` is still the process that started then."""
    now = start_ticks(pid, exiting=True)
    if now is None or (ticks is not None and now != ticks):
        return False
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
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
