# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Agent harnesses people deploy (mini-swe-agent, tool-calling SDKs) as a rollout's agent: their
model calls go through the recording endpoint, token-exact, and their commands into the
rollout's sandbox."""

from collections.abc import Mapping
from typing import Any

from nemo_gym_prorl.agent.harness.runner import HarnessRunner

HARNESSES = ("mini_swe_agent", "openai_agents")


def make_harness(options: Mapping[str, Any]) -> HarnessRunner:
    """The runner of the harness `options["name"]` names, with its options validated. Each
    harness package is imported only when a config names it."""
    name = options.get("name")
    if name == "mini_swe_agent":
        from nemo_gym_prorl.agent.harness.mini_swe_agent import MiniSweAgent, MiniSweAgentOptions

        mini = MiniSweAgentOptions.model_validate(dict(options))
        return HarnessRunner(MiniSweAgent(mini), command_timeout_s=mini.command_timeout_s)
    if name == "openai_agents":
        from nemo_gym_prorl.agent.harness.openai_agents import OpenAIAgents, OpenAIAgentsOptions

        sdk = OpenAIAgentsOptions.model_validate(dict(options))
        return HarnessRunner(OpenAIAgents(sdk), command_timeout_s=sdk.command_timeout_s)
    raise ValueError(f"unknown harness {name!r}; known: {', '.join(HARNESSES)}")
