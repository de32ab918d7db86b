# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The INIT sequence of every rollout, wherever its tools are served from: open the domain's
sandbox, let the domain set up the workspace, put the tools on it.

The in-process rollout (`agent.handler.InProcessTransport`) and the NeMo Gym resources server
(`integrations.gym.resources_server`) both open their sessions here, so a row starts the same
way on both paths.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from nemo_gym_prorl.sandbox import Sandbox, SandboxSpec, aopen_sandbox
from nemo_gym_prorl.tasks.base import TaskDomain
from nemo_gym_prorl.tools.dispatch import ToolBox, ToolBoxConfig


@dataclass
class Workspace:
    """One rollout's sandbox, its tools, and the facts the domain's setup reported."""

    sandbox: Sandbox
    tools: ToolBox
    facts: dict[str, Any]

    async def close(self) -> None:
        """Stop the tools, then the sandbox. Never raises: resources may already be gone.

        Nothing here blocks the event loop (a SWE sandbox's tree alone can take seconds to
        remove): processes are killed at once, the waiting parts run in threads."""
        with contextlib.suppress(Exception):
            await self.tools.close()
        with contextlib.suppress(Exception):
            await self.sandbox.aclose()


async def open_workspace(
    domain: TaskDomain,
    row: Mapping[str, Any],
    sandbox: SandboxSpec,
    tools: ToolBoxConfig,
    tool_names: Iterable[str],
) -> Workspace:
    """Open the sandbox for `row`, set up its workspace and offer `tool_names` (in order, once
    each) with `tools`' limits. On any failure the sandbox is closed before the error rises."""
    spec = domain.sandbox_spec(row, sandbox)
    # Apptainer's instance start blocks for seconds: keep the event loop free.
    box = await aopen_sandbox(spec)
    try:
        facts = await domain.setup_workspace(box, row)
        config = tools.model_copy(update={"tools": list(dict.fromkeys(tool_names))})
        return Workspace(sandbox=box, tools=ToolBox(box, config), facts=facts)
    except BaseException:
        await box.aclose()
        raise
