# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Closing a rollout's workspace never stalls the service's event loop: whatever waits (a
terminal's close, the cgroup's removal, the directory tree, a sleep) runs in a thread while the
other rollouts keep going."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from support.loop_ticks import loop_ticks

from nemo_gym_prorl.sandbox import SandboxSpec, open_sandbox
from nemo_gym_prorl.sandbox import base as sandbox_base
from nemo_gym_prorl.sandbox.limits import PidsCgroup
from nemo_gym_prorl.sandbox.terminal import TerminalProcess
from nemo_gym_prorl.tasks.workspace import Workspace
from nemo_gym_prorl.tools.dispatch import ToolBox

pytestmark = pytest.mark.bwrap


class BlockingCalls:
    """Records the thread of every call of the blocking functions it wraps."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[tuple[str, int]] = []
        self._wrap(monkeypatch, time, "sleep", "time.sleep")
        self._wrap(monkeypatch, sandbox_base, "remove_tree", "tree removal")
        self._wrap(monkeypatch, TerminalProcess, "close", "terminal close")
        self._wrap(monkeypatch, PidsCgroup, "remove", "cgroup removal")

    def _wrap(self, monkeypatch: pytest.MonkeyPatch, owner: Any, attr: str, name: str) -> None:
        original: Callable[..., Any] = getattr(owner, attr)

        def recorded(*args: Any, **kwargs: Any) -> Any:
            self.calls.append((name, threading.get_ident()))
            return original(*args, **kwargs)

        monkeypatch.setattr(owner, attr, recorded)

    def on(self, thread: int) -> list[str]:
        return [name for name, ident in self.calls if ident == thread]

    def names(self) -> set[str]:
        return {name for name, _ in self.calls}


async def test_closing_a_workspace_with_a_shell_and_a_kernel_leaves_the_event_loop_free(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    box = await asyncio.to_thread(open_sandbox, SandboxSpec(backend="bubblewrap"))
    workspace = Workspace(sandbox=box, tools=ToolBox(box), facts={})
    assert (await workspace.tools.call("bash", {"command": "echo ready"})).text == "ready"
    assert "Out[" in (await workspace.tools.call("ipython", {"code": "1+1"})).text
    shell_process = workspace.tools._shell._proc  # type: ignore[union-attr]
    blocking = BlockingCalls(monkeypatch)

    async with loop_ticks() as ticks:
        await workspace.close()
    during = ticks.count

    loop_thread = threading.get_ident()
    # The blocking parts did run (the terminal closed, the tree was removed)...
    assert {"terminal close", "tree removal"} <= blocking.names()
    # ...and none of them on the event loop, which kept ticking meanwhile.
    assert blocking.on(loop_thread) == []
    assert during > 0
    assert box.closed and not box.workspace.exists()
    assert shell_process is not None and not shell_process.isalive()


async def test_a_shell_closed_from_async_code_is_gone_and_its_terminal_closed() -> None:
    box = await asyncio.to_thread(open_sandbox, SandboxSpec(backend="bubblewrap"))
    try:
        tools = ToolBox(box)
        await tools.call("bash", {"command": "sleep 300 &"})
        process = tools._shell._proc  # type: ignore[union-attr]
        await tools.close()
        assert process is not None and process.closed and not process.isalive()
        obs = await tools.call("bash", {"command": "true"})
        assert obs.is_error and "closed" in obs.text
    finally:
        await box.aclose()
