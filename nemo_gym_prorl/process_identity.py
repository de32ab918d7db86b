# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Naming one process for good: its pid and when it started, in clock ticks since boot.

A pid is handed out again; a (pid, start ticks) pair within one boot is not. The ticks are the
kernel's own count (`/proc/<pid>/stat` field 22) and never change. A wall-clock start time
(psutil's `create_time`) is that count plus the boot time of `/proc/stat`, a whole second that
moves when the clock is adjusted: two readings of the same process may then differ by a second,
and a check by equality calls a live process gone.
"""

from __future__ import annotations

import os
from pathlib import Path

# include/linux/sched.h: set when a process starts exiting. A pid namespace's init that was
# killed lingers in that state until every process of the namespace has been reaped.
_PF_EXITING = 0x4
_BOOT_ID = Path("/proc/sys/kernel/random/boot_id")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def boot_id() -> str:
    return _BOOT_ID.read_text().strip()


def start_ticks(pid: int, *, exiting: bool = False) -> int | None:
    """When `pid` started, in clock ticks since boot, or None if no such process is alive (or it
    is exiting, unless `exiting`)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
    if not exiting and (fields[0] in ("Z", "X") or int(fields[6]) & _PF_EXITING):  # state (3), flags (9)
        return None
    return int(fields[19])  # field 22 overall; fields[0] is field 3


def is_running(pid: int, ticks: int) -> bool:
    """Whether the process that started at `ticks` under `pid` still runs (not a zombie)."""
    return start_ticks(pid) == ticks


def ticks_from_create_time(create_time: float) -> int:
    """A wall-clock start time (psutil's, as records written before ticks held it) in ticks,
    against the boot time now."""
    return round((create_time - _boot_time()) * CLOCK_TICKS)


def _boot_time() -> float:
    with open("/proc/stat", "rb") as f:
        for line in f:
            if line.startswith(b"btime"):
                return float(line.split()[1])
    raise RuntimeError("no btime line in /proc/stat")
