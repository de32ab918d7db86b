# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Every rollout of the demo ends within its few minutes: the demo's overrides reach the Gym
agent's own settings, as `gym env start` parses them, and bound each rollout's loop and its
time in the pipeline well inside the demo's 5 minutes."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf
from support.gym_config import parse_global_config

from nemo_gym_prorl.assets import project_root
from nemo_gym_prorl.demo.rows import CONSTRAINED_OVERRIDES, TIME_BUDGET_OVERRIDES
from nemo_gym_prorl.integrations.gym.config import ProRLAgentSettings
from nemo_gym_prorl.integrations.gym.launcher import compose

DEMO_TARGET_S = 300.0


def test_the_demos_time_budget_reaches_the_agent_and_fits_the_demo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NEMO_GYM_EXTRA_ROOTS", str(project_root()))
    monkeypatch.chdir(project_root())
    # Hydra's `++key=value` (set, adding the key if need be) as a plain dotted assignment.
    overrides = OmegaConf.from_dotlist(
        [o.lstrip("+") for o in (*TIME_BUDGET_OVERRIDES, *CONSTRAINED_OVERRIDES)]
    )
    config = parse_global_config(OmegaConf.merge({"config_paths": compose(["mixed"])}, overrides))
    agent = OmegaConf.to_container(config.prorl_agent.responses_api_agents.prorl_agent, resolve=True)
    assert isinstance(agent, dict)
    # the agent's own model: a misspelt key would be refused here, not silently ignored by Gym
    settings = ProRLAgentSettings.model_validate(
        {k: agent[k] for k in ProRLAgentSettings.model_fields if k in agent}
    )
    assert settings.agent.max_time_s is not None and settings.agent.max_time_s <= DEMO_TARGET_S / 2
    active = settings.pipeline.active_time_s
    assert active is not None and settings.agent.max_time_s < active < DEMO_TARGET_S
