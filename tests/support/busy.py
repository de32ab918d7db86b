# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""One call at a time: the check every stateful tool (shell, kernel) must pass."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import pytest


async def second_call_is_refused[T](
    first: Coroutine[Any, Any, T], second: Callable[[], Awaitable[object]], error: type[Exception]
) -> T:
    """Start `first`; while it runs, `second()` must raise `error` saying one is "already
    running". Returns `first`'s result, which the refusal must not have disturbed."""
    task = asyncio.create_task(first)
    await asyncio.sleep(0.05)
    with pytest.raises(error, match="already running"):
        await second()
    return await task
