# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""How often the event loop ran other work while something was awaited: a loop that a blocking
call stalls runs nothing else meanwhile."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass


@dataclass
class Ticks:
    count: int = 0


@contextlib.asynccontextmanager
async def loop_ticks() -> AsyncIterator[Ticks]:
    """`ticks.count`, after the block: the times a task yielding at every step ran during it."""
    ticks = Ticks()
    running = Ticks()

    async def tick() -> None:
        while True:
            running.count += 1
            await asyncio.sleep(0)

    ticker = asyncio.create_task(tick())
    await asyncio.sleep(0)
    before = running.count
    try:
        yield ticks
    finally:
        ticks.count = running.count - before
        ticker.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await ticker
