# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""A bounded priority queue with removal, one per stage.

asyncio.PriorityQueue cannot remove an entry, so a cancelled queued job would hold its slot
(and its memory) until a worker popped it. Here removal frees the slot at once; entries are
deleted lazily from the heap but no longer count towards the bound.
"""

from __future__ import annotations

import asyncio
import collections
import heapq
import itertools


class QueueFullError(RuntimeError):
    pass


class StageQueue[T]:
    """Higher priority first, then first-in first-out. `maxsize` bounds live entries.

    Waiters are plain futures (as in asyncio.Queue), so `remove` and `put_nowait` can wake
    them from synchronous code.
    """

    def __init__(self, maxsize: int) -> None:
        if maxsize < 1:
            raise ValueError("maxsize must be >= 1")
        self.maxsize = maxsize
        self._heap: list[tuple[int, int, str]] = []
        self._items: dict[str, T] = {}
        self._seq = itertools.count()
        self._getters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._putters: collections.deque[asyncio.Future[None]] = collections.deque()

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: str) -> bool:
        return key in self._items

    def free(self) -> int:
        return self.maxsize - len(self._items)

    @staticmethod
    def _wake_one(waiters: collections.deque[asyncio.Future[None]]) -> None:
        while waiters:
            waiter = waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    async def _wait(self, waiters: collections.deque[asyncio.Future[None]]) -> None:
        fut = asyncio.get_running_loop().create_future()
        waiters.append(fut)
        try:
            await fut
        except BaseException:
            fut.cancel()
            try:
                waiters.remove(fut)
            except ValueError:
                # We were woken and cancelled at once: pass the wake-up on.
                self._wake_one(waiters)
            raise

    def _push(self, key: str, item: T, priority: int) -> None:
        if key in self._items:
            raise ValueError(f"{key!r} is already queued")
        self._items[key] = item
        heapq.heappush(self._heap, (-priority, next(self._seq), key))
        # Lazily deleted entries must not let the heap grow without bound.
        if len(self._heap) > 2 * self.maxsize + 16:
            self._heap = [e for e in self._heap if e[2] in self._items]
            heapq.heapify(self._heap)
        self._wake_one(self._getters)

    def put_nowait(self, key: str, item: T, priority: int = 0) -> None:
        if len(self._items) >= self.maxsize:
            raise QueueFullError(f"queue full ({self.maxsize})")
        self._push(key, item, priority)

    def put_front(self, key: str, item: T) -> None:
        """Enqueue ahead of everything, even past the bound: for a job already admitted that
        must run again (its node was lost), which may never be refused or left behind."""
        if key in self._items:
            raise ValueError(f"{key!r} is already queued")
        self._items[key] = item
        heapq.heappush(self._heap, (-(2**62), -next(self._seq), key))
        self._wake_one(self._getters)

    async def put(self, key: str, item: T, priority: int = 0) -> None:
        """Wait for room (backpressure), then enqueue."""
        while len(self._items) >= self.maxsize:
            await self._wait(self._putters)
        self._push(key, item, priority)

    async def get(self) -> tuple[str, T]:
        while not self._items:
            await self._wait(self._getters)
        while True:
            _, _, key = heapq.heappop(self._heap)
            if key in self._items:
                item = self._items.pop(key)
                self._wake_one(self._putters)
                return key, item

    def remove(self, key: str) -> T | None:
        item = self._items.pop(key, None)
        if item is not None:
            self._wake_one(self._putters)
        return item

    def items(self) -> list[T]:
        return list(self._items.values())
