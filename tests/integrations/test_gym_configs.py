# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Configs: the 0.7 catalog entries validate (`gym env validate`), the launcher composes and links
the shared venv, the NeMo RL recipes use NeMo RL's key names and point at our Gym configs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from nemo_gym_prorl.assets import project_root
from nemo_gym_prorl.integrations.gym.launcher import collection_run_override, compose, link_venvs, server_dirs

ENVIRONMENTS = ["prorl_math", "prorl_stem", "prorl_code", "prorl_swe", "prorl_mixed"]


@pytest.mark.parametrize("name", ENVIRONMENTS)
def test_catalog_entry_validates(name: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from nemo_gym.environment.validation import validate_environment

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NEMO_GYM_EXTRA_ROOTS", str(project_root()))
    report = validate_environment(project_root() / "environments" / name / "manifest.yaml")
    assert report.inferred_profile == report.declared_profile == "custom-gym-agent-loop"
    assert not report.warnings and all(d.rows > 0 for d in report.datasets)
    assert any(c.role == "agent_server" and c.implementation == "prorl_agent" for c in report.components)


def test_catalog_is_discovered(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from nemo_gym.registry import discover_environments

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NEMO_GYM_EXTRA_ROOTS", str(project_root()))
    found = discover_environments()
    assert set(ENVIRONMENTS) <= set(found)


def test_launcher_composition_and_venv_links(tmp_path: Path) -> None:
    assert compose(["math"]) == ["configs/gym/prorl_math.yaml", "configs/gym/local_vllm.yaml"]
    assert compose(["mixed"])[0] == "configs/gym/prorl_mixed.yaml"
    for path in compose(["math", "code"]):
        assert (project_root() / path).is_file()
    dirs = server_dirs(["mixed"])
    assert "environment_servers/prorl_pipeline" in dirs and "resources_servers/prorl_swe" in dirs
    link_venvs(tmp_path, dirs, prefix=tmp_path / "venv")
    link_venvs(tmp_path, dirs, prefix=tmp_path / "venv")  # idempotent
    assert os.readlink(tmp_path / "responses_api_agents/prorl_agent/.venv") == str(
        (tmp_path / "venv").resolve()
    )


def test_gym_up_names_the_collection_run_of_the_environment_server_every_composition_runs() -> None:
    from omegaconf import OmegaConf

    from environment_servers.prorl_pipeline.app import ProRLPipelineEnvironmentServerConfig

    agent = OmegaConf.load(project_root() / "responses_api_agents/prorl_agent/configs/prorl_agent.yaml")
    key, _, value = collection_run_override("resumable-1").removeprefix("++").partition("=")
    OmegaConf.update(agent, key, value)
    block = OmegaConf.to_container(OmegaConf.select(agent, key.rsplit(".", 1)[0]), resolve=True)
    settings = ProRLPipelineEnvironmentServerConfig(host="127.0.0.1", port=0, name="env", **block)
    assert settings.collection_run == "resumable-1"


@pytest.mark.parametrize(
    "path", sorted((project_root() / "configs" / "nemo_rl").glob("*.yaml")), ids=lambda p: p.name
)
def test_nemo_rl_recipe(path: Path) -> None:
    cfg = yaml.safe_load(path.read_text())
    assert cfg["env"]["should_use_nemo_gym"] is True
    vllm = cfg["policy"]["generation"]["vllm_cfg"]
    assert vllm["async_engine"] is True and vllm["expose_http_server"] is True
    assert cfg["data"]["default"] == {
        "dataset_name": "NemoGymDataset",
        "env_name": "nemo_gym",
        "processor": "nemo_gym_data_processor",
    }
    paths = cfg["env"]["nemo_gym"]["config_paths"]
    assert "responses_api_models/vllm_model/configs/vllm_model_for_training.yaml" in paths
    assert all((project_root() / p).is_file() for p in paths if p.startswith("configs/"))
    domain = path.stem.split("_prorl_")[1].removesuffix("_single_controller")
    assert (
        cfg["data"]["train"]["data_path"] == f"data/prorl/{domain}/train.jsonl"
    )  # what `prorl data prepare` writes
    grpo, loss = cfg["grpo"], cfg["loss_fn"]
    assert loss["token_level_loss"] is True
    if "async_rl" in cfg:  # single controller: DAPO's filter is the prompt-group sampler
        sampler = cfg["async_rl"]["sampler"]
        assert sampler["name"] == "custom" and sampler["target"].endswith(":ZeroVarianceSkippingSampler")
        assert grpo["max_rollout_turns"] == 1 and loss["ratio_clip_max"] == 0.28
    elif path.name.startswith("dapo_"):
        assert grpo["use_dynamic_sampling"] is True and grpo["batch_multiplier"] > 1
        assert grpo["reward_shaping"]["enabled"] is True and loss["ratio_clip_max"] == 0.28
    else:
        assert grpo["use_dynamic_sampling"] is False
