# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Opening a sandbox off the event loop: a rollout cancelled while its sandbox opens (a
service stopping, a client's cancel) leaves no sandbox behind."""

from __future__ import annotations

import asyncio
import shutil
import time

import pytest

from nemo_gym_prorl.sandbox import Sandbox, SandboxSpec, aopen_sandbox, factory

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (`bwrap`) is not installed")


async def test_it_opens_a_working_sandbox() -> None:
    box = await aopen_sandbox(SandboxSpec())
    try:
        assert (await box.exec("echo ok")).stdout == "ok\n"
    finally:
        await box.aclose()


async def test_a_sandbox_still_opening_when_its_rollout_is_cancelled_is_closed_once_it_exists(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    made: list[Sandbox] = []
    real_open = factory.open_sandbox

    def slow_open(spec: SandboxSpec | None = None) -> Sandbox:
        time.sleep(0.3)  # the open is under way in its thread when the cancel comes
        box = real_open(spec)
        made.append(box)
        return box

    monkeypatch.setattr(factory, "open_sandbox", slow_open)
    opening = asyncio.create_task(aopen_sandbox(SandboxSpec()))
    await asyncio.sleep(0.05)
    opening.cancel()
    with pytest.raises(asyncio.CancelledError):
        await opening
    for _ in range(100):
        if made and made[0].closed and not made[0]._dir.exists():
            break
        await asyncio.sleep(0.05)
    assert made and made[0].closed, "the sandbox the thread made was closed"
    assert not made[0]._dir.exists(), "and its directory removed"
