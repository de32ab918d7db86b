# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""`prorl data prepare`: train/validation JSONL in NeMo RL's Gym format, from installed packages."""

from __future__ import annotations

import json
from pathlib import Path

from nemo_gym_prorl.cli import main


def read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_prepare_writes_disjoint_gym_rows_for_nemo_rl(tmp_path: Path) -> None:
    args = ["data", "prepare", "--domain", "math", "--math-per-task", "6", "--out", str(tmp_path)]
    assert main(args) == 0
    train, validation = read(tmp_path / "math" / "train.jsonl"), read(tmp_path / "math" / "validation.jsonl")
    assert len(train) >= 30 and validation
    assert not {r["task_id"] for r in train} & {r["task_id"] for r in validation}
    for row in train + validation:
        assert row["agent_ref"] == {"type": "responses_api_agents", "name": "prorl_agent"}
        assert row["data_source"] == "prorl_math" and row["expected_answer"]
        assert row["responses_create_params"]["input"][-1]["role"] == "user"
        assert {t["name"] for t in row["responses_create_params"]["tools"]} == {"ipython", "submit"}
