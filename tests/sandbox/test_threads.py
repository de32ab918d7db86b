# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Sandboxes open and close in threads of their own, which yield the CPU to the event loop."""

from __future__ import annotations

import os
import threading

from nemo_gym_prorl.sandbox.threads import THREAD_NICE, in_sandbox_thread


def _own_nice() -> int:
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


async def test_a_sandbox_thread_runs_below_the_event_loops_cpu_priority() -> None:
    loop_nice = _own_nice()
    assert await in_sandbox_thread(_own_nice) == min(19, loop_nice + THREAD_NICE)
    assert _own_nice() == loop_nice  # the loop's own thread keeps its priority
