# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Every shipped recipe is one NeMo RL (at the recorded commit) would start; broken ones are refused by name."""

from __future__ import annotations

import copy
import json
import subprocess
from pathlib import Path

import pytest

from nemo_gym_prorl.cli import main as prorl
from nemo_gym_prorl.integrations.nemo_rl import derive
from nemo_gym_prorl.integrations.nemo_rl.check import check_recipe, detect_runner
from nemo_gym_prorl.integrations.nemo_rl.recipe import load_recipe
from nemo_gym_prorl.integrations.nemo_rl.rules import check_runner_rules
from nemo_gym_prorl.integrations.nemo_rl.schema import load_record, validate

RECIPES = sorted((Path(__file__).resolve().parents[3] / "configs" / "nemo_rl").glob("*.yaml"))
NEMO_RL_MIRROR = Path("/work/.mirror/NVIDIA-NeMo+RL/repo")


def test_the_recipes_cover_grpo_and_dapo_on_both_runners() -> None:
    kinds = {(p.stem.split("_")[0], detect_runner(load_recipe(p))) for p in RECIPES}
    assert {("grpo", "grpo"), ("dapo", "grpo"), ("dapo", "single_controller")} <= kinds


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda p: p.stem)
def test_every_recipe_passes_nemo_rl_schema_runner_rules_and_ours(recipe: Path) -> None:
    report = check_recipe(recipe)
    assert report.ok, report.render()


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda p: p.stem)
def test_training_turns_gyms_observability_off_over_the_gym_configs(
    recipe: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Gym configs a recipe composes turn observability on; Gym's own parser, given the recipe's
    `env.nemo_gym` as NeMo RL hands it over, must end with it off (each /run would otherwise ship
    a trajectory whose size grows with the square of the turn count)."""
    from support.gym_config import parse_global_config

    from nemo_gym_prorl.assets import project_root
    from nemo_gym_prorl.integrations.gym.observability import capture_dir

    monkeypatch.setenv("NEMO_GYM_EXTRA_ROOTS", str(project_root()))
    monkeypatch.chdir(project_root())
    gym = load_recipe(recipe)["env"]["nemo_gym"]
    config = parse_global_config(gym)
    assert config["observability_enabled"] is False and capture_dir(config) is None


def test_the_record_names_the_nemo_rl_commit_it_was_derived_from() -> None:
    record = load_record()
    assert len(record["nemo_rl_commit"]) == 40
    assert set(record["roots"]) == {"grpo", "single_controller"}
    assert all(rule["anchors"] for rule in record["runner_rules"])


def test_a_misspelled_required_key_is_named() -> None:
    config = load_recipe(RECIPES[0])
    config["policy"]["generation"]["val_top_pp"] = config["policy"]["generation"].pop("val_top_p")
    problems = [str(p) for p in validate(config, "grpo")]
    assert problems == ["policy.generation.val_top_p: Field required (type=missing)"]


def test_a_wrong_type_is_named_with_the_value() -> None:
    config = load_recipe(RECIPES[0])
    config["grpo"]["num_prompts_per_step"] = "many"
    assert any(
        p.path == "grpo.num_prompts_per_step" and "many" in p.message for p in validate(config, "grpo")
    )


def test_the_pre_fix_recipes_fail_with_the_fifteen_errors_nemo_rl_raised() -> None:
    config = load_recipe(RECIPES[0])
    for key in ("val_temperature", "val_top_p", "val_top_k"):
        del config["policy"]["generation"][key]
    for key in ("swanlab_enabled", "mlflow_enabled", "wandb", "gpu_monitoring", "num_val_samples_to_print"):
        del config["logger"][key]
    del config["policy"]["make_sequence_length_divisible_by"]
    missing = {p.path for p in validate(config, "grpo") if "Field required" in p.message}
    assert missing == {
        "policy.generation.val_temperature", "policy.generation.val_top_p", "policy.generation.val_top_k",
        "policy.make_sequence_length_divisible_by", "logger.swanlab_enabled", "logger.mlflow_enabled",
        "logger.wandb", "logger.gpu_monitoring", "logger.num_val_samples_to_print",
    }  # fmt: skip


def test_gym_runner_refuses_max_val_samples() -> None:
    config = load_recipe(RECIPES[0])
    config["grpo"]["max_val_samples"] = 256
    assert [p.path for p in check_runner_rules(config, "grpo")] == ["grpo.max_val_samples"]
    del config["grpo"]["max_val_samples"]  # NeMo RL's default is 256: absent is refused too
    assert [p.path for p in check_runner_rules(config, "grpo")] == ["grpo.max_val_samples"]


def test_single_controller_rules() -> None:
    sc = next(p for p in RECIPES if "single_controller" in p.stem)
    config = load_recipe(sc)
    bad = copy.deepcopy(config)
    bad["grpo"]["max_rollout_turns"] = 8
    bad["grpo"]["async_grpo"] = {"enabled": False}
    bad["policy"]["train_global_batch_size"] = 256
    bad["checkpointing"]["metric_name"] = "val_reward"
    bad["data_plane"]["enabled"] = False
    paths = {p.path for p in check_runner_rules(bad, "single_controller")}
    assert paths == {
        "grpo.max_rollout_turns", "grpo.async_grpo", "policy.train_global_batch_size",
        "checkpointing.metric_name", "data_plane.enabled",
    }  # fmt: skip
    del config["async_rl"]
    assert "async_rl" in {p.path for p in validate(config, "single_controller")}


def test_our_rules_catch_foreign_agents_missing_paths_and_sampling_mismatch(tmp_path: Path) -> None:
    config = load_recipe(RECIPES[0])
    gym = config["env"]["nemo_gym"]
    gym["config_paths"].append("configs/gym/prorl_nowhere.yaml")
    agent = next(b for b in gym.values() if isinstance(b, dict) and "responses_api_agents" in b)
    agent["responses_api_agents"]["prorl_agent"]["sampling"] = {"temperature": 0.6, "top_p": 0.95}
    agent["responses_api_agents"]["prorl_agent"]["agent"]["max_turnz"] = 3
    gym["other"] = {"responses_api_agents": {"simple_agent": {}}}
    del agent["responses_api_agents"]["prorl_agent"]["infrastructure_failures"]
    config["policy"]["generation"]["top_k"] = 20
    recipe = tmp_path / "edited.yaml"
    recipe.write_text(json.dumps(config))
    report = check_recipe(recipe)
    paths = {p.path for p in report.errors}
    assert "env.nemo_gym.config_paths[2]" in paths
    assert "env.nemo_gym.other.responses_api_agents.simple_agent" in paths
    assert "policy.generation.top_k" in paths
    assert any(p.endswith("prorl_agent.sampling") for p in paths)
    assert any(p.endswith("agent.max_turnz") for p in paths)
    assert any(p.endswith("prorl_agent.infrastructure_failures") for p in paths)  # sync runner: must mask


def test_cli_check_passes_shipped_recipes_and_names_a_misspelled_key(tmp_path: Path, capsys) -> None:
    assert prorl(["nemo-rl", "check", *map(str, RECIPES)]) == 0
    text = (
        RECIPES[0]
        .read_text()
        .replace("  make_sequence_length_divisible_by:", "  make_sequence_lenght_divisible_by:")
    )
    broken = tmp_path / "broken.yaml"
    broken.write_text(text)
    capsys.readouterr()
    assert prorl(["nemo-rl", "check", str(broken)]) == 1
    out = capsys.readouterr().out
    assert "REJECTED" in out and "policy.make_sequence_length_divisible_by: Field required" in out


def test_cli_check_reports_an_unreadable_recipe(tmp_path: Path, capsys) -> None:
    assert prorl(["nemo-rl", "check", str(tmp_path / "absent.yaml")]) == 1
    assert "cannot be read" in capsys.readouterr().out


@pytest.mark.skipif(
    not NEMO_RL_MIRROR.is_dir(), reason="needs a NeMo RL git directory (fetch NVIDIA-NeMo/RL)"
)
def test_the_record_is_reproduced_from_nemo_rl_source() -> None:
    commit = load_record()["nemo_rl_commit"]
    tree = derive.GitTree(NEMO_RL_MIRROR, commit)
    schema = derive.derive_schema(tree)
    assert derive.diff_schema(load_record(), schema) == []
    assert derive.missing_anchors(load_record(), tree) == []
    older = subprocess.run(
        ["git", "--git-dir", str(NEMO_RL_MIRROR), "rev-list", "-n1", f"{commit}~200"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    if older:  # an older NeMo RL is reported as moved
        assert derive.main(["--git-dir", str(NEMO_RL_MIRROR), "--rev", older]) == 1


@pytest.mark.skipif(
    not NEMO_RL_MIRROR.is_dir(), reason="needs a NeMo RL git directory (fetch NVIDIA-NeMo/RL)"
)
def test_check_against_a_nemo_rl_checkout(tmp_path: Path) -> None:
    commit = load_record()["nemo_rl_commit"]
    archive = subprocess.run(
        ["git", "--git-dir", str(NEMO_RL_MIRROR), "archive", commit, "nemo_rl", "examples"],
        capture_output=True,
        check=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(tmp_path)], input=archive, check=True)
    report = check_recipe(RECIPES[0], nemo_rl=tmp_path)
    assert report.ok and not [w for w in report.warnings if w.source == "derive"], report.render()
    config = load_recipe(RECIPES[0])
    del config["policy"]["dtensor_cfg"]["cpu_offload"]
    edited = tmp_path / "edited.yaml"
    edited.write_text(json.dumps(config))
    assert "policy.dtensor_cfg.DTensorConfig.cpu_offload" in {
        p.path for p in check_recipe(edited, nemo_rl=tmp_path).errors
    }


@pytest.fixture(scope="module")
def nemo_rl_examples(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not NEMO_RL_MIRROR.is_dir():
        pytest.skip("needs a NeMo RL git directory (fetch NVIDIA-NeMo/RL)")
    root = tmp_path_factory.mktemp("nemo_rl")
    archive = subprocess.run(
        ["git", "--git-dir", str(NEMO_RL_MIRROR), "archive", load_record()["nemo_rl_commit"], "examples"],
        capture_output=True,
        check=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(root)], input=archive, check=True)
    return root / "examples"


def test_nemo_rl_own_grpo_examples_pass_the_rebuilt_schema(nemo_rl_examples: Path, monkeypatch) -> None:
    """No false alarms: every GRPO example NeMo RL's own config test validates passes here too."""
    monkeypatch.setenv("HF_HOME", "/nonexistent")
    checked = 0
    for path in sorted((nemo_rl_examples / "configs").rglob("*.yaml")):
        config = load_recipe(path)
        other = {"distillation", "dpo", "sft", "teachers"} & set(config)
        if "/evals/" in str(path) or other or "projection_matrix_path" in (config.get("loss_fn") or {}):
            continue  # the selection of NeMo RL's tests/unit/test_config_validation.py
        if "grpo" not in config:
            continue
        assert validate(config, "grpo") == [], path
        if "async_rl" in config and (config.get("data_plane") or {}).get("enabled"):
            assert validate(config, "single_controller") == [], path
            gym_only = [p for p in check_runner_rules(config, "single_controller") if "gym" not in p.source]
            assert gym_only == [], path
        checked += 1
    assert checked > 100


def test_nemo_rl_own_gym_recipes_pass_the_gym_runner_rules(nemo_rl_examples: Path) -> None:
    for name in (
        "grpo_nanov3.yaml",
        "grpo_qwen3_30ba3b_instruct.yaml",
        "grpo_qwen3_30ba3b_thinking_swe1.yaml",
    ):
        config = load_recipe(nemo_rl_examples / "nemo_gym" / name)
        assert validate(config, "grpo") == [] and check_runner_rules(config, "grpo") == [], name
