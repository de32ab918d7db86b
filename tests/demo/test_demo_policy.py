# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""`prorl demo --policy DIR` serves a trained adapter; a directory that is not one is refused
before anything starts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nemo_gym_prorl.cli.main import build_parser
from nemo_gym_prorl.demo import run_demo


def test_a_directory_that_is_neither_an_adapter_nor_a_checkpoint_is_refused_before_anything_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_demo(quick=True, policy=tmp_path) == 2
    assert "neither a LoRA adapter (adapter_config.json) nor a checkpoint" in capsys.readouterr().out


def test_an_adapter_trained_over_other_weights_than_the_embedded_model_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A GRPO adapter of `prorl train` is a LoRA over the merged SFT weights, not over SmolLM2.
    (tmp_path / "weights-v000001").mkdir()
    adapter = tmp_path / "policy-v000002"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text(
        json.dumps({"base_model_name_or_path": str(tmp_path / "weights-v000001")})
    )
    assert run_demo(quick=True, policy=adapter) == 2
    assert "not over the embedded model: serve a checkpoint" in capsys.readouterr().out


def test_the_policy_flag_reaches_the_demo_as_a_path() -> None:
    args = build_parser().parse_args(["demo", "--quick", "--policy", "runs/policy-v000006"])
    assert args.policy == Path("runs/policy-v000006") and args.quick


def test_a_trained_policy_is_shown_on_its_runs_heldout_tasks_with_its_training_prompts(
    tmp_path: Path,
) -> None:
    from nemo_gym_prorl.demo.rows import as_trained
    from nemo_gym_prorl.training.config import load_train_config
    from nemo_gym_prorl.training.loop import write_policy_settings

    config = load_train_config("default")
    write_policy_settings(tmp_path / "policies", config)
    adapter = tmp_path / "policies" / "policy-v000013"
    others = [{"data_source": "prorl_code", "task_id": "c1"}, {"data_source": "prorl_math", "task_id": "m1"}]
    rows, overrides = as_trained(adapter, others)
    families = [r["reasoning_gym"]["family"] for r in rows if r["data_source"] == "prorl_math"]
    assert families == [*config.split.families, *config.split.rl_families, *config.split.rl_families]
    assert all(r["split"] == "heldout" for r in rows if r["data_source"] == "prorl_math")
    assert [r["task_id"] for r in rows if r["data_source"] != "prorl_math"] == ["c1"]
    assert overrides == [
        f"++prorl_agent.responses_api_agents.prorl_agent.llm.tool_prompt={config.tool_prompt}"
    ]


def test_an_adapter_from_elsewhere_keeps_the_demos_own_rows_and_prompts(tmp_path: Path) -> None:
    from nemo_gym_prorl.demo.rows import as_trained

    rows = [{"data_source": "prorl_math", "task_id": "m1"}]
    assert as_trained(tmp_path / "policy", rows) == (rows, [])
