# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""A process is named for good by its pid and its start in clock ticks since boot."""

from __future__ import annotations

import os
import subprocess

import psutil

from nemo_gym_prorl.process_identity import is_running, start_ticks, ticks_from_create_time


def test_a_running_process_keeps_its_start_ticks_and_is_running_under_them() -> None:
    ticks = start_ticks(os.getpid())
    assert ticks is not None and ticks > 0
    assert start_ticks(os.getpid()) == ticks
    assert is_running(os.getpid(), ticks)
    assert not is_running(os.getpid(), ticks + 1)  # another process that had this pid


def test_a_zombie_is_not_running_but_its_start_can_still_be_read_until_it_is_reaped() -> None:
    child = subprocess.Popen(["true"])
    ticks = start_ticks(child.pid, exiting=True)
    assert ticks is not None
    os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # exited, not reaped: a zombie
    assert start_ticks(child.pid) is None and not is_running(child.pid, ticks)
    assert start_ticks(child.pid, exiting=True) == ticks
    child.wait()
    assert start_ticks(child.pid, exiting=True) is None


def test_a_wall_clock_start_time_converts_to_the_same_ticks() -> None:
    assert ticks_from_create_time(psutil.Process(os.getpid()).create_time()) == start_ticks(os.getpid())
