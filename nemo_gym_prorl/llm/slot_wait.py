# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Time spent waiting for a model slot, told to whoever budgets the waiting caller's time.

A rollout's time budget measures its own work. A line in front of full model backends is the
service's backpressure, not the rollout's work: charged to the budget, it would turn load into
timeouts. So the balancer reports each wait here, and a budget keeper (the pipeline's stage
runner, the agent loop) listens in its own context and stops its clock meanwhile. The listeners
travel in a context variable, so concurrent jobs never see each other's waits.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Protocol

__all__ = [
    "SlotWaitClock",
    "SlotWaitListener",
    "current_listeners",
    "listen",
    "listening_as",
    "waiting_for_slot",
]


class SlotWaitListener(Protocol):
    def slot_wait_began(self) -> None: ...

    def slot_wait_ended(self) -> None: ...


_LISTENERS: ContextVar[tuple[SlotWaitListener, ...]] = ContextVar("prorl_slot_wait_listeners", default=())


@contextlib.contextmanager
def listen(listener: SlotWaitListener) -> Iterator[None]:
    """Tell `listener` about every slot wait of this context (tasks started in it included)."""
    token = _LISTENERS.set((*_LISTENERS.get(), listener))
    try:
        yield
    finally:
        _LISTENERS.reset(token)


def current_listeners() -> tuple[SlotWaitListener, ...]:
    """This context's listeners: to hand over to work done for it elsewhere (a harness's model
    calls arrive as the recording endpoint's own requests, in tasks of their own)."""
    return _LISTENERS.get()


@contextlib.contextmanager
def listening_as(listeners: tuple[SlotWaitListener, ...]) -> Iterator[None]:
    """Report this context's slot waits to `listeners` (from `current_listeners` elsewhere)."""
    token = _LISTENERS.set(listeners)
    try:
        yield
    finally:
        _LISTENERS.reset(token)


def tell_slot_wait(began: bool) -> None:
    """Tell this context's listeners that a slot wait began or ended: for a wait seen elsewhere
    (a Ray node's pool, whose stage reports its waits to the service that budgets the job)."""
    listeners = _LISTENERS.get()
    for listener in listeners if began else reversed(listeners):
        if began:
            listener.slot_wait_began()
        else:
            listener.slot_wait_ended()


@contextlib.contextmanager
def waiting_for_slot() -> Iterator[None]:
    """Around a wait for a slot (the balancer's): the context's listeners stop their clocks."""
    tell_slot_wait(True)
    try:
        yield
    finally:
        tell_slot_wait(False)


class SlotWaitClock:
    """The seconds during which at least one model request of its context waited for a slot,
    and an `asyncio.Timeout` (bound with `pausing`) that stands still meanwhile.

    Several requests of one job may wait at once: the clock stops at the first wait and goes on
    when the last ends. `on_began`/`on_ended` let an owner split its own accounting at the same
    instants."""

    def __init__(
        self, *, on_began: Callable[[], None] | None = None, on_ended: Callable[[], None] | None = None
    ) -> None:
        self._on_began = on_began
        self._on_ended = on_ended
        self._waiting = 0
        self._since = 0.0
        self._waited = 0.0
        self._timer: asyncio.Timeout | None = None
        self._left: Callable[[], float | None] = lambda: None
        self._deadline: float | None = None

    @property
    def waiting(self) -> bool:
        return self._waiting > 0

    def waited_s(self) -> float:
        """Seconds waited so far, a wait in progress included."""
        open_wait = time.monotonic() - self._since if self._waiting else 0.0
        return self._waited + open_wait

    @contextlib.contextmanager
    def pausing(
        self, timer: asyncio.Timeout, left: Callable[[], float | None], deadline: float | None = None
    ) -> Iterator[None]:
        """Stop `timer` while a slot wait lasts; when it ends, restart it with `left()` seconds
        (None: no limit). `deadline` (time.monotonic) still applies during the wait: a
        wall-clock deadline is not a budget of work."""
        self._timer, self._left, self._deadline = timer, left, deadline
        try:
            yield
        finally:
            self._timer, self._left, self._deadline = None, lambda: None, None

    def slot_wait_began(self) -> None:
        self._waiting += 1
        if self._waiting > 1:
            return
        self._since = time.monotonic()
        if self._on_began is not None:
            self._on_began()
        self._reschedule(self._deadline)

    def slot_wait_ended(self) -> None:
        self._waiting -= 1
        if self._waiting > 0:
            return
        self._waited += time.monotonic() - self._since
        if self._on_ended is not None:
            self._on_ended()
        left = self._left()
        self._reschedule(None if left is None else time.monotonic() + left)

    def _reschedule(self, at: float | None) -> None:
        timer = self._timer
        if timer is None or timer.expired():
            return
        when = None if at is None else asyncio.get_running_loop().time() + (at - time.monotonic())
        # A timer not (or no longer) running has nothing to stop.
        with contextlib.suppress(RuntimeError):
            timer.reschedule(when)
