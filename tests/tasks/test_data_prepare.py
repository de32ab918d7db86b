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


def test_swe_prepare_includes_every_generated_instance_in_the_cache(tmp_path: Path, monkeypatch) -> None:
    """Generated instances are SWE-bench rows like the built ones: prepare writes them too."""
    import nemo_gym_prorl.tasks.swe as swe

    async def built(*_: object, **__: object) -> list[dict]:
        return []  # the hand-written instances download sdists; not here

    monkeypatch.setattr(swe, "ensure_built", built)
    monkeypatch.setenv("PRORL_HOME", str(tmp_path / "home"))
    cache = tmp_path / "home" / "swe" / "generated"
    cache.mkdir(parents=True)
    instances = [{"instance_id": f"toolz__gen-{i}", "repo": "toolz", "base_commit": "0" * 40,
                  "problem_statement": f"test_{i} fails", "FAIL_TO_PASS": [f"t.py::test_{i}"], "PASS_TO_PASS": [],
                  "eval_script": "", "recipe": {"generator": "ast-mutation/1"}} for i in range(10)]  # fmt: skip
    (cache / "instances.jsonl").write_text("".join(json.dumps(i) + "\n" for i in instances))
    assert main(["data", "prepare", "--domain", "swe", "--out", str(tmp_path / "out")]) == 0
    rows = read(tmp_path / "out" / "swe" / "train.jsonl") + read(
        tmp_path / "out" / "swe" / "validation.jsonl"
    )
    assert sorted(r["instance_id"] for r in rows) == sorted(i["instance_id"] for i in instances)
    assert all(
        r["data_source"] == "prorl_swe" and "test_" in json.dumps(r["responses_create_params"]) for r in rows
    )
