# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Waits that sleep in the kernel until what they wait for happens, not in a polling loop.

Sandboxes open and close in threads of the service's own process (`threads.py`). A thread that
polls every few milliseconds takes the GIL back from the event loop at every wake: at a
thousand rollouts, dozens of such threads woke thousands of times a second between them, and
the loop waited behind them. poll(2) on a pipe or a pidfd waits without the GIL and wakes once."""

from __future__ import annotations

import contextlib
import os
import select
import time
from collections.abc import Callable, Sequence

# Where pidfd_open is missing (Linux < 5.3): how often a wait for another process's exit looks.
_FALLBACK_POLL_S = 0.02


def readable(fds: Sequence[int], timeout_s: float) -> list[int]:
    """Those of `fds` that are readable (or at end of file) within `timeout_s`; empty if none."""
    poller = select.poll()
    for fd in fds:
        poller.register(fd, select.POLLIN)  # POLLHUP and POLLERR are reported anyway
    return [fd for fd, _ in poller.poll(max(0.0, timeout_s) * 1000)]


def wait_for_exit(pid: int, timeout_s: float, *, still_it: Callable[[], bool]) -> bool:
    """Whether the process `pid` is gone within `timeout_s`. `still_it()` says whether `pid` is
    still the process meant (its start time, say): it is asked once the pid is held by a pidfd,
    after which the number cannot be reused, so a reused pid is never waited for."""
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    except (AttributeError, OSError):
        return _poll_for_exit(timeout_s, still_it)
    try:
        return not still_it() or bool(readable([pidfd], timeout_s))
    finally:
        with contextlib.suppress(OSError):
            os.close(pidfd)


def _poll_for_exit(timeout_s: float, still_it: Callable[[], bool]) -> bool:
    deadline = time.monotonic() + timeout_s
    while still_it():
        if time.monotonic() >= deadline:
            return False
        time.sleep(_FALLBACK_POLL_S)
    return True
