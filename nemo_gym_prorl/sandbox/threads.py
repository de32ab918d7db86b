# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The threads sandboxes open and close in, apart from Python's default pool.

Opening a sandbox (bubblewrap's start, an Apptainer instance), closing one (a terminal's close,
the removal of a SWE repository's tree) and copying a repository into one mostly wait on the
kernel and on other processes. Python's default pool has min(32, cores + 4) threads: six on a
two-core machine, shared with everything else `asyncio.to_thread` runs. At a thousand rollouts
that queue, not the work, would set how fast rollouts start and end. Waiting threads cost
little, so this pool is wide."""

from __future__ import annotations

import asyncio
import functools
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

SANDBOX_THREADS_VARIABLE = "PRORL_SANDBOX_THREADS"  # a process executor's workers get their part
SANDBOX_THREADS = int(os.environ.get(SANDBOX_THREADS_VARIABLE, "0")) or max(32, 8 * (os.cpu_count() or 1))

_pool: ThreadPoolExecutor | None = None


def sandbox_pool() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=SANDBOX_THREADS, thread_name_prefix="prorl-sandbox")
    return _pool


async def in_sandbox_thread[T](fn: Callable[..., T], /, *args: object, **kwargs: object) -> T:
    """`fn(*args, **kwargs)` in the sandbox pool, awaited without blocking the event loop."""
    return await asyncio.get_running_loop().run_in_executor(
        sandbox_pool(), functools.partial(fn, *args, **kwargs)
    )
