# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The training report: gains are paired per task with 95% intervals, the checks say what the run
showed (and can fail), and the results file carries provenance beside the figures."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.scripted_rollout_service import model_turn

from nemo_gym_prorl.integrations.trl.stats import RolloutStats
from nemo_gym_prorl.training.config import TrainConfig
from nemo_gym_prorl.training.evaluation import PolicyEvaluation, paired_gain
from nemo_gym_prorl.training.report import TrainReport, write_results


def result(i: int, reward: float, tool_calls: int) -> dict[str, Any]:
    return {
        "id": f"r{i}",
        "state": "done",
        "reward": reward,
        "trajectory": {
            "steps": [{}] * tool_calls,
            "num_turns": tool_calls + 1,
            "messages": [model_turn([1, 2], [3])],
        },
    }


def evaluation(phase: str, rewards: list[float], tool_calls: int) -> PolicyEvaluation:
    results = [result(i, r, tool_calls) for i, r in enumerate(rewards)]
    return PolicyEvaluation(
        phase=phase, policy_version=None, stats=RolloutStats.of(results), rewards=list(rewards), seconds=1.0
    )


def step(n: int, mismatch: float, staleness: int = 0) -> dict[str, Any]:
    return {
        "step": n, "reward": 0.5, "tool_calls": 1.0, "staleness": staleness, "policy_versions": [n],
        "mismatch": {"mean_abs_diff": mismatch},
    }  # fmt: skip


def report(
    base: list[float], grpo: list[float], *, grpo_calls: int = 1, mismatch: float = 0.01
) -> TrainReport:
    r = TrainReport.start(TrainConfig())
    r.evaluations = {
        "base": evaluation("base", base, 0),
        "sft": evaluation("sft", grpo, grpo_calls),
        "grpo": evaluation("grpo", grpo, grpo_calls),
    }
    r.grpo_steps = [step(1, mismatch), step(2, mismatch)]
    r.finish({"grpo": 1.0}, 10.0)
    return r


def test_a_clear_paired_gain_passes_every_check() -> None:
    r = report([0.0] * 64, [1.0] * 40 + [0.0] * 24)
    gain = r.gains["grpo_vs_base"]
    assert gain.mean == pytest.approx(40 / 64, abs=1e-4) and gain.low > 0
    assert all(r.checks.values()), r.checks


def test_no_gain_no_tool_use_or_a_large_mismatch_fail_their_checks() -> None:
    r = report([0.0] * 64, [0.0] * 63 + [1.0], grpo_calls=0, mismatch=0.2)
    assert not r.checks["grpo_gain_at_least_0.2"]
    assert not r.checks["grpo_gain_interval_above_zero"]
    assert not r.checks["grpo_tool_calls_at_least_1"]
    assert not r.checks["mismatch_at_most_0.05_every_step"]


def test_gains_pair_tasks_and_skip_masked_ones() -> None:
    before = evaluation("base", [0.0, 1.0, 0.0], 0)
    after = evaluation("grpo", [1.0, 1.0, 0.0], 0).model_copy(update={"rewards": [1.0, None, 0.0]})
    assert paired_gain(before, after).n == 2 and paired_gain(before, after).mean == 0.5


def test_the_results_file_carries_commit_machine_and_every_evaluation(tmp_path: Path) -> None:
    json_path, png = write_results(report([0.0] * 64, [1.0] * 64), "train_test", results_dir=tmp_path)
    data = json.loads(json_path.read_text())
    assert data["benchmark"] == "train_test" and data["command"] == "prorl train"
    assert {"sha", "dirty"} <= set(data["commit"]) and data["machine"]["cores"] >= 1
    assert set(data["figures"]["evaluations"]) == {"base", "sft", "grpo"}
    assert data["figures"]["gains"]["grpo_vs_base"]["low"] > 0
    assert png.stat().st_size > 10_000
