# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Handler factories for the service configuration (`tasks.<name>.handler`).

tasks:
  math:
    handler: nemo_gym_prorl.agent.factory:domain_handler
    options: {domain: math, agent: {max_turns: 8}, tools: {ipython_timeout_s: 30}, config: {...}}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nemo_gym_prorl.agent.deps import HandlerDeps
from nemo_gym_prorl.agent.handler import AgentRolloutHandler, domain_rollout_handler
from nemo_gym_prorl.agent.harness import make_harness
from nemo_gym_prorl.agent.loop import AgentLimits
from nemo_gym_prorl.tasks import make_task_from_options
from nemo_gym_prorl.tools.dispatch import ToolBoxConfig


def domain_handler(
    deps: HandlerDeps,
    *,
    domain: str,
    agent: Mapping[str, Any] | None = None,
    tools: Mapping[str, Any] | None = None,
    config: Mapping[str, Any] | None = None,
    harness: Mapping[str, Any] | None = None,
) -> AgentRolloutHandler:
    """An agent rollout handler for one task domain, sharing the service's LLM pool and
    sandbox defaults. `agent` -> AgentLimits, `tools` -> ToolBoxConfig, `config` -> the domain's
    own config model, `harness` -> a harness's options (`{name: mini_swe_agent, ...}`) when a
    harness, not the built-in loop, drives RUN; every key is validated."""
    return domain_rollout_handler(
        make_task_from_options(domain, config),
        deps.llm,
        sandbox=deps.sandbox,
        limits=AgentLimits.model_validate(dict(agent or {})),
        tools=ToolBoxConfig.model_validate(dict(tools or {})),
        harness=make_harness(harness) if harness is not None else None,
    )
