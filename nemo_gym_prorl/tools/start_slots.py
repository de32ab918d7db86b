# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""How many tool processes (shells, kernels) start at once on one event loop.

A thousand rollouts begin their first tool call within seconds of each other. Started all at
once, every start got a sliver of the two cores and hundreds passed their start timeout
together; queued (first come, first served), each starts in its own moments, and the queue is
backpressure: a tool's start timeout counts from when its start begins, not from the queue."""

from __future__ import annotations

import asyncio
import os
import weakref


class StartSlots:
    """At most `limit` starts at once per event loop (each loop has its own semaphore: a
    semaphore belongs to the loop that first waited on it)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._slots: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
            weakref.WeakKeyDictionary()
        )

    def __call__(self) -> asyncio.Semaphore:
        """This event loop's slots."""
        loop = asyncio.get_running_loop()
        slots = self._slots.get(loop)
        if slots is None:
            slots = self._slots[loop] = asyncio.Semaphore(self.limit)
        return slots

    def replace(self, loop: asyncio.AbstractEventLoop, slots: asyncio.Semaphore) -> None:
        """Use `slots` on `loop` from now on (a test holding the only slot)."""
        self._slots[loop] = slots


def limit_from_env(variable: str, per_core: int) -> int:
    """`variable`'s value when set, else `per_core` starts for each core."""
    return int(os.environ.get(variable, "0")) or per_core * (os.cpu_count() or 1)
