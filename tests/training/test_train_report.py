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

from nemo_gym_prorl.rollouts.stats import RolloutStats
from nemo_gym_prorl.training.config import TrainConfig
from nemo_gym_prorl.training.evaluation import PolicyEvaluation, paired_gain
from nemo_gym_prorl.training.progress import grpo_step_line
from nemo_gym_prorl.training.report import TrainReport, smallest_flagged_drop, write_results


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


DEMONSTRATED = ["gcd", "lcm"]
RL_FAMILIES = ["chain_sum", "products"]


def evaluation(phase: str, rewards: dict[str, list[float]], tool_calls: int = 1) -> PolicyEvaluation:
    """An evaluation of 32 tasks per family, with these rewards in order."""
    families = [family for family, values in rewards.items() for _ in values]
    flat = [r for values in rewards.values() for r in values]
    results = [result(i, r, tool_calls) for i, r in enumerate(flat)]
    by_family = {
        family: RolloutStats.of([res for res, f in zip(results, families, strict=True) if f == family])
        for family in rewards
    }
    return PolicyEvaluation(
        phase=phase,
        policy_version=None,
        stats=RolloutStats.of(results),
        rewards=list(flat),
        families=families,
        by_family=by_family,
        seconds=1.0,
    )


def step(n: int, mismatch: float, staleness: int = 0, unversioned: int = 0) -> dict[str, Any]:
    return {
        "step": n, "reward": 0.5, "tool_calls": 1.0, "staleness": staleness, "policy_versions": [n],
        "unversioned": unversioned, "mismatch": {"mean_abs_diff": mismatch},
    }  # fmt: skip


def scores(correct: int, n: int = 32) -> list[float]:
    return [1.0] * correct + [0.0] * (n - correct)


def report(
    *,
    sft_rl: int,
    grpo_rl: int,
    sft_demo: int = 24,
    grpo_demo: int = 24,
    grpo_calls: int = 1,
    mismatch: float = 1e-5,
    minutes: float = 40.0,
) -> TrainReport:
    r = TrainReport.start(TrainConfig(), demonstrated=DEMONSTRATED, rl_families=RL_FAMILIES)
    r.evaluations = {
        "base": evaluation("base", {f: scores(0) for f in DEMONSTRATED + RL_FAMILIES}, 0),
        "sft": evaluation(
            "sft", {**{f: scores(sft_demo) for f in DEMONSTRATED}, **{f: scores(sft_rl) for f in RL_FAMILIES}}
        ),
        "grpo": evaluation(
            "grpo",
            {**{f: scores(grpo_demo) for f in DEMONSTRATED}, **{f: scores(grpo_rl) for f in RL_FAMILIES}},
            grpo_calls,
        ),
    }
    r.grpo_steps = [step(1, mismatch), step(2, mismatch)]
    r.finish({"grpo": 1.0}, minutes * 60)
    return r


def test_rl_that_teaches_the_families_without_demonstrations_passes_every_check() -> None:
    r = report(sft_rl=4, grpo_rl=16)
    gain = r.gains["rl_over_sft:rl_families"]
    assert gain.mean == pytest.approx(12 / 32, abs=1e-4) and gain.low > 0
    assert all(r.checks.values()), r.checks


def test_each_gain_is_credited_to_the_phase_that_made_it() -> None:
    r = report(sft_rl=4, grpo_rl=4, sft_demo=24, grpo_demo=24)
    assert r.gains["sft_over_base:demonstrated"].mean == pytest.approx(24 / 32, abs=1e-4)
    assert r.gains["rl_over_sft:rl_families"].mean == 0.0
    assert r.gains["rl_over_base:rl_families"].mean == pytest.approx(4 / 32, abs=1e-4)
    # A gain over the base model is the demonstrations' as much as RL's: it passes no RL check.
    assert r.checks["demonstrations_over_base_on_demonstrated_families_interval_above_zero"]
    assert not r.checks["rl_over_its_start_on_families_without_demonstrations_at_least_0.10"]
    assert not r.checks["rl_over_its_start_on_families_without_demonstrations_interval_above_zero"]


def test_a_demonstrated_family_that_rl_made_forget_fails_its_check() -> None:
    r = report(sft_rl=4, grpo_rl=16, sft_demo=30, grpo_demo=10)
    assert r.gains["rl_over_sft:gcd"].high < 0
    assert not r.checks["no_demonstrated_family_falls_under_rl_beyond_its_interval"]


def test_every_family_is_reported_on_its_own_in_every_phase() -> None:
    r = report(sft_rl=4, grpo_rl=16)
    assert set(r.families) == set(DEMONSTRATED + RL_FAMILIES)
    assert set(r.families["products"]) == {"base", "sft", "grpo"}
    assert r.families["products"]["grpo"].reward.mean == 0.5 and r.families["gcd"]["base"].tool_calls == 0
    lines = r.family_lines()
    assert any(line.startswith("products (no demonstrations)") and "RL +0.38" in line for line in lines)


def test_no_tool_use_a_large_mismatch_or_an_overlong_run_fail_their_checks() -> None:
    r = report(sft_rl=4, grpo_rl=16, grpo_calls=0, mismatch=0.2, minutes=75)
    assert not r.checks["rl_policy_calls_a_tool_per_rollout"]
    assert not r.checks["mismatch_at_most_1e-3_every_step"]
    assert not r.checks["run_within_60_min_besides_greedy_and_pass_at_k"]


def test_greedy_and_pass_at_k_are_measurement_beside_the_run_and_their_minutes_are_not_the_runs() -> None:
    r = report(sft_rl=4, grpo_rl=16)
    r.finish({"grpo": 1.0, "measure_sft": 600.0, "measure_grpo": 600.0}, 75 * 60)
    assert r.checks["run_within_60_min_besides_greedy_and_pass_at_k"]
    assert "75.0 min (20.0 of them greedy and pass@k)" in r.summary()
    r.finish({"grpo": 1.0, "measure_sft": 60.0}, 75 * 60)
    assert not r.checks["run_within_60_min_besides_greedy_and_pass_at_k"]


def measured(e: PolicyEvaluation, greedy: list[float], best: list[float], k: int = 4) -> PolicyEvaluation:
    return e.model_copy(
        update={"measured_families": RL_FAMILIES, "greedy": greedy, "pass_at_k": best, "pass_k": k}
    )


def test_rl_that_sharpens_shows_in_the_greedy_sample_and_not_in_pass_at_k() -> None:
    r = report(sft_rl=4, grpo_rl=16)
    tasks = 2 * 32
    r.evaluations["sft"] = measured(r.evaluations["sft"], scores(8, tasks), scores(40, tasks))
    r.evaluations["grpo"] = measured(r.evaluations["grpo"], scores(40, tasks), scores(40, tasks))
    r.finish({"grpo": 1.0}, 40 * 60)
    assert r.gains["greedy:rl_over_sft:rl_families"].mean == pytest.approx(0.5)
    assert r.gains["pass@4:rl_over_sft:rl_families"].mean == 0.0
    # Measured on the RL families only: no greedy gain is claimed for the others or for the base model.
    assert (
        "greedy:rl_over_sft:demonstrated" not in r.gains and "greedy:sft_over_base:rl_families" not in r.gains
    )
    assert "RL (greedy) +0.50" in r.summary() and "RL (pass@4) +0.00" in r.summary()


def test_a_metric_that_was_not_measured_on_a_family_is_refused_not_read_as_empty() -> None:
    e = measured(report(sft_rl=4, grpo_rl=16).evaluations["sft"], scores(8, 64), scores(40, 64))
    with pytest.raises(ValueError, match="did not measure greedy"):
        e.family_rewards(["gcd"], "greedy")
    assert len(e.family_rewards(["products"], "pass")) == 32


def test_the_forgetting_checks_power_is_the_smallest_drop_it_can_flag() -> None:
    r = report(sft_rl=4, grpo_rl=16, sft_demo=24)
    power = r.forgetting_check_power["gcd"]
    assert power["tasks"] == 32 and power["sft_reward"] == 0.75
    drop = power["smallest_flagged_drop"]
    assert 0 < drop < 0.75
    # One task fewer lost is not flagged; exactly that drop is.
    lost = round(drop * 32)
    assert report(sft_rl=4, grpo_rl=16, sft_demo=24, grpo_demo=24 - lost + 1).checks[
        "no_demonstrated_family_falls_under_rl_beyond_its_interval"
    ]
    assert not report(sft_rl=4, grpo_rl=16, sft_demo=24, grpo_demo=24 - lost).checks[
        "no_demonstrated_family_falls_under_rl_beyond_its_interval"
    ]
    assert smallest_flagged_drop(16, 0.0) is None  # nothing solved: nothing to forget
    assert smallest_flagged_drop(64, 0.75) < smallest_flagged_drop(16, 0.75)  # more tasks, finer check


def test_a_stale_step_an_unversioned_rollout_or_a_mismatch_just_past_its_bound_fail_their_checks() -> None:
    r = report(sft_rl=4, grpo_rl=16)
    assert r.checks["staleness_within_bound_every_step"] and r.checks["every_rollout_records_its_versions"]
    bound = r.config["max_staleness"]
    # Past the bound, even with the service's stale flag set: the flag does not excuse it.
    r.grpo_steps = [step(1, 1e-5), {**step(2, 1e-5, staleness=bound + 1), "stale": 3}]
    assert not r._checks()["staleness_within_bound_every_step"]
    # Fresh when they finished, but trained on after the policy moved past the bound.
    r.grpo_steps = [step(1, 1e-5), {**step(2, 1e-5, staleness=0), "staleness_at_update": bound + 1}]
    assert not r._checks()["staleness_within_bound_every_step"]
    # One rollout of the step recorded no version, though the step's union of versions is not empty.
    r.grpo_steps = [step(1, 1e-5), step(2, 1e-5, unversioned=1)]
    assert not r._checks()["every_rollout_records_its_versions"]
    r.grpo_steps = [step(1, 1e-5), step(2, 2e-3)]
    assert not r._checks()["mismatch_at_most_1e-3_every_step"]
    r.grpo_steps = []  # no GRPO step at all: nothing was shown to hold
    assert not r._checks()["staleness_within_bound_every_step"]
    assert not r._checks()["every_rollout_records_its_versions"]


def test_gains_pair_tasks_and_skip_masked_ones() -> None:
    before = evaluation("base", {"gcd": [0.0, 1.0, 0.0]}, 0)
    after = evaluation("grpo", {"gcd": [1.0, 1.0, 0.0]}, 0).model_copy(update={"rewards": [1.0, None, 0.0]})
    assert paired_gain(before, after).n == 2 and paired_gain(before, after).mean == 0.5


def test_the_results_file_carries_commit_machine_every_family_and_the_credited_gains(tmp_path: Path) -> None:
    json_path, png = write_results(
        report(sft_rl=4, grpo_rl=16), "train_test", "prorl train --config train_test", results_dir=tmp_path
    )
    data = json.loads(json_path.read_text())
    assert data["benchmark"] == "train_test" and data["command"] == "prorl train --config train_test"
    assert {"sha", "dirty"} <= set(data["commit"]) and data["machine"]["cores"] >= 1
    assert set(data["figures"]["evaluations"]) == {"base", "sft", "grpo"}
    assert set(data["figures"]["families"]) == set(DEMONSTRATED + RL_FAMILIES)
    assert data["figures"]["gains"]["rl_over_sft:rl_families"]["low"] > 0
    assert "RL (GRPO over SFT, families without demonstrations) +0.38" in data["table"]["measured"]
    assert data["figures"]["heldout"] == {
        "set": "tuning", "tuning_seeds": [1_000_000, 1_000_032], "test_seeds": [2_000_000, 2_000_032]
    }  # fmt: skip
    assert png.stat().st_size > 10_000


def test_a_step_with_no_group_to_teach_is_counted_and_its_line_says_nothing_was_trained() -> None:
    r = report(sft_rl=4, grpo_rl=16)
    skipped = {
        **{k: v for k, v in step(3, 1e-5).items() if k != "mismatch"},
        "skipped": "no group can teach: 0 of 6 groups have rewards that differ",
        "informative_groups": 0, "teaching_groups": 0, "groups": 6, "staleness_at_update": 0, "masked": 0,
        "rollout_s": 30.0, "rollout_tokens_per_s": 12.0, "train_s": 0.4, "turns": 2.0,
    }  # fmt: skip
    r.grpo_steps = [step(1, 1e-5), step(2, 1e-5), skipped]
    r.finish({"grpo": 1.0}, 40 * 60)
    assert r.skipped_steps == [3]
    assert "1 of 3 GRPO steps had no group to teach (steps [3]: trainer skipped, no version published)" in (
        r.summary()
    )
    assert r.checks["mismatch_at_most_1e-3_every_step"]  # a step that trained nothing measured nothing
    line = grpo_step_line(skipped, 3)
    assert line.startswith("GRPO step 3/3: reward 0.500, 0/6 informative groups")
    assert line.endswith(
        "no group can teach: 0 of 6 groups have rewards that differ: nothing trained (0s), no version published"
    )


def test_a_step_line_says_how_much_of_a_harnesss_tokens_was_delivered_and_why_the_rest_was_not() -> None:
    fields = {
        "step": 1, "reward": 0.5, "informative_groups": 1, "groups": 2, "tool_calls": 1.0, "turns": 2.0,
        "staleness": 0, "staleness_at_update": 1, "policy_versions": [1], "masked": 0, "merged_share": 0.9,
        "delivered_share": 0.82, "undelivered_shares": {"the harness broke the token chain": 0.18},
        "rollout_s": 30.0, "rollout_tokens_per_s": 12.0, "skipped": "no group can teach", "train_s": 0.4,
    }  # fmt: skip
    assert "delivered share 0.82 (not delivered, 0.18 the harness broke the token chain)" in grpo_step_line(
        fields, 1
    )
