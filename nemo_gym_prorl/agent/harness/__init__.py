# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Agent harnesses people deploy (mini-swe-agent, tool-calling SDKs) as a rollout's agent: their
model calls go through the recording endpoint, token-exact, and their commands into the
rollout's sandbox."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

if TYPE_CHECKING:  # the runner (the service's side) is imported when a runner is made: a
    # harness's own process imports this package too, and needs none of it (nor NeMo Gym)
    from nemo_gym_prorl.agent.harness.runner import HarnessRunner

HARNESSES = ("mini_swe_agent", "openai_agents")


def harness_options(options: Mapping[str, Any]) -> BaseModel:
    """`options` validated by the options model of the harness its `name` names (a config error,
    raised when the config loads, for an unknown harness or option)."""
    name = options.get("name")
    if name == "mini_swe_agent":
        from nemo_gym_prorl.agent.harness.mini_swe_agent import MiniSweAgentOptions

        return MiniSweAgentOptions.model_validate(dict(options))
    if name == "openai_agents":
        from nemo_gym_prorl.agent.harness.openai_agents import OpenAIAgentsOptions

        return OpenAIAgentsOptions.model_validate(dict(options))
    raise ValueError(f"unknown harness {name!r}; known: {', '.join(HARNESSES)}")


def make_harness(options: Mapping[str, Any]) -> HarnessRunner:
    """The runner of the harness `options["name"]` names. Each harness package is imported only
    when a config names it."""
    from nemo_gym_prorl.agent.harness.runner import HarnessRunner

    settings = harness_options(options)
    if settings.name == "mini_swe_agent":
        from nemo_gym_prorl.agent.harness.mini_swe_agent import MiniSweAgent

        return HarnessRunner(MiniSweAgent(settings), command_timeout_s=settings.command_timeout_s)
    from nemo_gym_prorl.agent.harness.openai_agents import OpenAIAgents

    return HarnessRunner(OpenAIAgents(settings), command_timeout_s=settings.command_timeout_s)
