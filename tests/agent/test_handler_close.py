# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Closing a service's handlers reaches each task domain: its pooled processes (grader workers,
warm test runners) end with the service, not at interpreter exit."""

from __future__ import annotations

from typing import Any

from nemo_gym_prorl.agent.handler import domain_rollout_handler
from nemo_gym_prorl.pipeline import HandlerRegistry
from nemo_gym_prorl.tasks.command_output import CommandOutputTask


class PooledTask(CommandOutputTask):
    def __init__(self) -> None:
        super().__init__()
        self.closed = 0

    async def aclose(self) -> None:
        self.closed += 1


async def test_closing_the_registry_closes_every_domain_behind_its_handlers() -> None:
    domains = [PooledTask(), PooledTask()]
    registry = HandlerRegistry()
    llm: Any = object()  # never called: no rollout runs
    for i, domain in enumerate(domains):
        registry.register(f"task{i}", domain_rollout_handler(domain, llm))
    await registry.aclose()
    assert [d.closed for d in domains] == [1, 1]
