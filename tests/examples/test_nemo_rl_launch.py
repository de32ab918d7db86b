# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""examples/nemo_rl_launch.sh: NeMo RL is not installed here, so its smoke test checks what can
be checked: every launch line it prints names a recipe that exists, with the data keys it
overrides, the NeMo RL entry point the recipes name, and a `prorl data` command that works."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "examples" / "nemo_rl_launch.sh"
ENTRY_POINT = "examples/nemo_gym/run_grpo_nemo_gym.py"


def launch(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=60,
        env={"PATH": "/usr/bin:/bin", **env},
    )  # fmt: skip


@pytest.mark.parametrize("algo", ["grpo", "dapo"])
@pytest.mark.parametrize("domain", ["math", "stem", "code", "swe", "mixed"])
def test_dry_run_names_an_existing_recipe_and_its_data(algo: str, domain: str) -> None:
    run = launch(algo, domain, "--dry-run", "--", "grpo.max_num_steps=2")
    assert run.returncode == 0, run.stderr
    lines = dict(line.split(":", 1) for line in run.stdout.splitlines())
    recipe = Path(lines["recipe"].strip())
    assert recipe == REPO / "configs" / "nemo_rl" / f"{algo}_prorl_{domain}.yaml" and recipe.is_file()
    config = yaml.safe_load(recipe.read_text())
    assert {"train", "validation"} <= set(config["data"])  # the keys the launch line overrides
    assert "data_path" in config["data"]["train"] and "data_path" in config["data"]["validation"]
    assert ENTRY_POINT in recipe.read_text()  # the recipe's own run line names the same entry point
    train = lines["train"]
    assert f"uv run {ENTRY_POINT} --config {recipe}" in train and train.endswith("grpo.max_num_steps=2")
    assert f"data.train.data_path={REPO}/data/prorl/{domain}/train.jsonl" in train
    prepare = lines["data"].split()
    assert Path(prepare[0]).is_file() and prepare[1:3] == ["data", "prepare"]
    assert prepare[prepare.index("--domain") + 1] == ("all" if domain == "mixed" else domain)


def test_the_data_step_writes_what_the_launch_line_reads(tmp_path: Path) -> None:
    run = launch("grpo", "math", "--dry-run", DATA_DIR=str(tmp_path))
    prepare = dict(line.split(":", 1) for line in run.stdout.splitlines())["data"].split()
    done = subprocess.run(prepare, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "math" / "train.jsonl").stat().st_size > 0
    assert (tmp_path / "math" / "validation.jsonl").stat().st_size > 0


def test_mistakes_are_clear_errors(tmp_path: Path) -> None:
    bad = launch("ppo", "math", "--dry-run")
    assert bad.returncode == 2 and "grpo or dapo" in bad.stderr
    missing = launch("grpo", "chess", "--dry-run")
    assert missing.returncode == 2 and "no recipe" in missing.stderr
    no_nemo_rl = launch("grpo", "math")
    assert no_nemo_rl.returncode != 0 and "NEMO_RL_DIR" in no_nemo_rl.stderr
    not_a_checkout = launch("grpo", "math", NEMO_RL_DIR=str(tmp_path))
    assert not_a_checkout.returncode == 2 and "not a NeMo RL checkout" in not_a_checkout.stderr
