# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""One zmq context for every IPython kernel client of the process.

A zmq context owns threads (libzmq starts an I/O thread and a reaper with its first socket) and
file descriptors. jupyter_client makes a context per client unless it is handed one, so a
thousand live kernels would cost two thousand threads; sockets are what each client needs, and
they are cheap. The shared context lives until the process exits.
"""

from __future__ import annotations

import atexit
import os
import threading

import zmq.asyncio

__all__ = ["shared_context"]

_lock = threading.Lock()
_context: zmq.asyncio.Context | None = None
_owner_pid = 0
_exit_hook = False


def shared_context() -> zmq.asyncio.Context:
    """The process's context for kernel clients, made on first use.

    A forked child gets a context of its own: libzmq's threads do not survive a fork, so the
    parent's context is unusable there."""
    global _context, _owner_pid, _exit_hook
    with _lock:
        if _context is None or _context.closed or _owner_pid != os.getpid():
            _context, _owner_pid = zmq.asyncio.Context(), os.getpid()
            if not _exit_hook:
                atexit.register(_close)
                _exit_hook = True
        return _context


def _close() -> None:
    """At exit: close whatever sockets are left without waiting to send (linger 0), so the
    context's threads end and the interpreter is not held up."""
    with _lock:
        if _context is not None and not _context.closed and _owner_pid == os.getpid():
            _context.destroy(linger=0)
