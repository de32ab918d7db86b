# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""SIGINT and SIGTERM as one orderly shutdown, for a command that must stop what it started.

Python's defaults fail such a command (the demo starts a model server and the Gym stack, each in
a session of its own so that only its shutdown signals them) in three ways:

- Started in the background by a script (`cmd &` in a non-interactive shell, an agent's tool), a
  process inherits SIGINT *ignored*; Python then installs no KeyboardInterrupt handler and
  `asyncio.run` none either, so Ctrl-C or `kill -INT` does nothing at all.
- SIGTERM's default action ends the process on the spot: no `finally` runs, and everything it
  started keeps running, orphaned.
- A second Ctrl-C raises KeyboardInterrupt again wherever the shutdown is, and cuts it short.

`StopOnSignals` handles both signals, whatever was inherited. The first one stops the work: in
synchronous code it raises `Interrupted` where the main thread is; inside `run(coro)` it cancels
the coroutine as `asyncio.run` does on Ctrl-C (so the coroutine's own cleanup runs), and `run`
raises `Interrupted` once the coroutine has unwound; inside `holding()` (the shutdown) nothing
is raised before the block ends. Every later signal only prints a note: one `Interrupted` at
most comes out, so the shutdown is never cut short.

    with StopOnSignals("[demo] {signal}: already stopping") as signals:
        try:
            try:
                ...  # start things; signals.run(coroutine) for the asyncio parts
            finally:
                with signals.holding():
                    ...  # stop what was started
        except Interrupted as stop:
            return stop.exit_code  # 130 for SIGINT, 143 for SIGTERM
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any, TypeVar

T = TypeVar("T")
SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(KeyboardInterrupt):
    """The signal that asked the command to stop. A KeyboardInterrupt, so that `except Exception`
    on its way up lets it through as it lets Ctrl-C through."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(self.name)

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name

    @property
    def exit_code(self) -> int:
        """The shells' convention, 128 + the signal's number: 130 for SIGINT, 143 for SIGTERM."""
        return 128 + self.signum


class StopOnSignals:
    """While entered (in the main thread): SIGINT and SIGTERM stop the work, once.

    `busy_note` is printed for every signal that does not raise (`{signal}` is its name): those
    after the first, and the first one inside `holding()`.
    """

    def __init__(self, busy_note: str = "{signal}: already stopping") -> None:
        self.busy_note = busy_note
        self.signum: int | None = None  # the first signal received
        self._delivered = False  # Interrupted has been raised
        self._holding = False
        self._task: asyncio.Task[Any] | None = None  # the coroutine `run` is running
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> StopOnSignals:
        # Handlers can only be set from the main thread; elsewhere the signals keep their defaults.
        if threading.current_thread() is threading.main_thread():
            for sig in SIGNALS:
                self._previous[sig] = signal.signal(sig, self._on_signal)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()

    @property
    def stop_name(self) -> str | None:
        """The first signal's name (SIGINT, SIGTERM), None while none came."""
        return signal.Signals(self.signum).name if self.signum is not None else None

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """`asyncio.run(coro)`; a signal cancels `coro` and, once it has unwound, raises
        `Interrupted` (also when `coro` finished anyway)."""

        async def main() -> T:
            self._task = asyncio.current_task()
            try:
                return await coro
            finally:
                self._task = None

        try:
            result = asyncio.run(main())
        except asyncio.CancelledError:
            self._raise_once()
            raise
        finally:
            coro.close()  # a no-op once it ran; spares a never-awaited warning when it could not start
        self._raise_once()
        return result

    @contextmanager
    def holding(self) -> Iterator[None]:
        """No signal raises inside (a shutdown must finish); the first one is raised as
        `Interrupted` when the block ends, unless it ends with an exception of its own."""
        self._holding = True
        try:
            yield
        finally:
            self._holding = False
        self._raise_once()

    def _raise_once(self) -> None:
        if self.signum is not None and not self._delivered:
            self._delivered = True
            raise Interrupted(self.signum)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        first = self.signum is None
        if first:
            self.signum = signum
        if not first or self._holding:
            # Unbuffered: a print() here could land inside a print() of the main thread, which
            # Python refuses (reentrant call on a buffered stream).
            note = self.busy_note.format(signal=signal.Signals(signum).name)
            os.write(2, f"{note}\n".encode())
            return
        task = self._task
        if task is not None and not task.done():
            # What asyncio.run does on Ctrl-C: cancel the main task, and wake the loop up in case
            # it is waiting in select().
            task.cancel()
            task.get_loop().call_soon_threadsafe(lambda: None)
            return
        self._delivered = True
        raise Interrupted(signum)
