# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The threads sandboxes open and close in, apart from Python's default pool.

Opening a sandbox (bubblewrap's start, an Apptainer instance), closing one (a terminal's close,
the removal of a SWE repository's tree) and copying a repository into one mostly wait on the
kernel and on other processes. Python's default pool has min(32, cores + 4) threads: six on a
two-core machine, shared with everything else `asyncio.to_thread` runs. At a thousand rollouts
that queue, not the work, would set how fast rollouts start and end. Waiting threads cost
little, so this pool is wide.

Its threads run at a lower CPU priority than the event loop (`THREAD_NICE`, as the sandboxes'
own processes): their work is much of the kernel's (namespaces, cgroups, file trees), and at a
thousand rollouts it took as much CPU as the loop itself, which then waited for a core as long
as it ran. The loop drives every rollout; a sandbox opening or closing a little later costs one."""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

SANDBOX_THREADS = int(os.environ.get("PRORL_SANDBOX_THREADS", "0")) or max(32, 8 * (os.cpu_count() or 1))
THREAD_NICE = 10

logger = logging.getLogger(__name__)

_pool: ThreadPoolExecutor | None = None


def yield_cpu_to_the_loop() -> None:
    """Lower this thread's CPU priority by `THREAD_NICE` (Linux: a thread has its own nice; any
    user may lower its own). Where it cannot, the thread runs on at the process's priority."""
    tid = threading.get_native_id()
    try:
        os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + THREAD_NICE))
    except OSError as exc:
        logger.debug("sandbox thread keeps the service's CPU priority: %s", exc)


def sandbox_pool() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(
            max_workers=SANDBOX_THREADS, thread_name_prefix="prorl-sandbox", initializer=yield_cpu_to_the_loop
        )
    return _pool


async def in_sandbox_thread[T](fn: Callable[..., T], /, *args: object, **kwargs: object) -> T:
    """`fn(*args, **kwargs)` in the sandbox pool, awaited without blocking the event loop."""
    return await asyncio.get_running_loop().run_in_executor(
        sandbox_pool(), functools.partial(fn, *args, **kwargs)
    )
