# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""One retry policy for the clients of the rollout service: which errors are tried again, the
pauses before each new try, and an optional deadline for them all.

A call (or a stream that reconnects) runs its tries as a loop of attempts, the same way sync
and async:

    for attempt in TRANSPORT.attempts(retry=call.repeatable):
        with attempt:
            return send(call)

An error the policy retries, raised inside `with attempt`, is kept while tries are left (the
loop pauses, then the next attempt runs); any other error, or one on the last try, propagates
unchanged. `async for attempt in policy.attempts_async()` pauses with `asyncio.sleep`.

Pure Python and httpx: the project venv and the trainers' model venv both import it.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from types import TracebackType

import httpx


@dataclass(frozen=True)
class RetryPolicy:
    delays_s: tuple[float, ...]  # the pause before each new try: len(delays_s) retries at most
    retry_on: tuple[type[BaseException], ...]  # the errors another try may get past
    deadline_s: float | None = None  # no new try would start later than this after the first

    @property
    def tries(self) -> int:
        """How many tries a call that keeps failing gets."""
        return 1 + len(self.delays_s)

    def attempts(self, *, retry: bool = True) -> Iterator[Attempt]:
        """The attempts of one call; `retry=False`: one attempt (a call that may not run twice)."""
        for attempt in self._tries(retry):
            yield attempt
            if attempt.pause_s is None:
                return
            time.sleep(attempt.pause_s)

    async def attempts_async(self, *, retry: bool = True) -> AsyncIterator[Attempt]:
        """`attempts`, pausing with `asyncio.sleep`."""
        for attempt in self._tries(retry):
            yield attempt
            if attempt.pause_s is None:
                return
            await asyncio.sleep(attempt.pause_s)

    def _tries(self, retry: bool) -> Iterator[Attempt]:
        started = time.monotonic()
        for number in itertools.count(1):
            yield Attempt(self, number, started, retry)

    def pause_after(self, error: BaseException, number: int, started: float) -> float | None:
        """The pause before another try after try `number` (from 1) failed with `error`, or None
        when the error is to be raised: one the policy does not retry, or no try left."""
        if not isinstance(error, self.retry_on) or number > len(self.delays_s):
            return None
        pause = self.delays_s[number - 1]
        if self.deadline_s is not None and time.monotonic() + pause - started > self.deadline_s:
            return None
        return pause


class Attempt:
    """One try: a context manager that keeps an error its policy retries (see the module)."""

    def __init__(self, policy: RetryPolicy, number: int, started: float, retry: bool) -> None:
        self.policy, self.number, self._started, self._retry = policy, number, started, retry
        self.pause_s: float | None = None  # set when this try failed and another is to follow

    def __enter__(self) -> Attempt:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> bool:
        if error is not None and self._retry:
            self.pause_s = self.policy.pause_after(error, self.number, self._started)
        return self.pause_s is not None


# A request that got no answer (a refused or cut connection, a timeout) is tried again after
# these pauses, about 15 s in all; the clients retry only calls that cannot do anything twice.
TRANSPORT = RetryPolicy(delays_s=(0.5, 1.0, 2.0, 4.0, 8.0), retry_on=(httpx.TransportError,))
