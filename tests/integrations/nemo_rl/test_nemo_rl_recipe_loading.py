# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Recipes load as NeMo RL's `load_config` loads them: `defaults` parents, `_override_`, resolvers."""

from __future__ import annotations

from pathlib import Path

import pytest

from nemo_gym_prorl.integrations.nemo_rl.recipe import load_recipe


def test_defaults_override_and_resolvers(tmp_path: Path) -> None:
    (tmp_path / "base").mkdir()
    (tmp_path / "base" / "parent.yaml").write_text(
        "policy: {max_total_sequence_length: 4096, train_micro_batch_size: 2}\n"
        "logger: {wandb: {project: a, name: b}, log_dir: logs}\n"
    )
    (tmp_path / "child.yaml").write_text(
        "defaults: base/parent.yaml\n"
        "policy:\n"
        "  dynamic_batching: {train_mb_tokens: '${mul:${policy.max_total_sequence_length}, ${policy.train_micro_batch_size}}'}\n"
        "logger:\n"
        "  _override_: true\n"
        "  wandb: {project: c}\n"
    )
    config = load_recipe(tmp_path / "child.yaml")
    assert config["policy"]["dynamic_batching"]["train_mb_tokens"] == 8192
    assert config["policy"]["max_total_sequence_length"] == 4096  # inherited
    assert config["logger"] == {"wandb": {"project": "c"}}  # a top-level section replaced, not merged
    assert "defaults" not in config


def test_bad_defaults_are_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text("defaults: {a: 1}\n")
    with pytest.raises(ValueError, match="defaults"):
        load_recipe(tmp_path / "bad.yaml")
    (tmp_path / "loop.yaml").write_text("defaults: loop.yaml\n")
    with pytest.raises(ValueError, match="nests deeper"):
        load_recipe(tmp_path / "loop.yaml")
