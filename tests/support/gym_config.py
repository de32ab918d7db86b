# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Gym's own parse of a global config, as `gym env start` reads it: offline, no model server
required, nothing from the command line or an env.yaml. Run from the repository root with it in
NEMO_GYM_EXTRA_ROOTS, so our config paths resolve."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nemo_gym.global_config import GlobalConfigDictParser, GlobalConfigDictParserConfig
from omegaconf import DictConfig, OmegaConf


def parse_global_config(config: Mapping[str, Any]) -> DictConfig:
    initial = OmegaConf.merge(GlobalConfigDictParserConfig.NO_MODEL_GLOBAL_CONFIG_DICT, dict(config))
    return GlobalConfigDictParser().parse(
        GlobalConfigDictParserConfig(
            initial_global_config_dict=initial,
            skip_load_from_cli=True,
            skip_load_from_dotenv=True,
            offline=True,
        )
    )
