# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""`prorl bench harness`'s bookkeeping, without a model: the arms' order, vLLM's counters, the
figures per arm and over the repetitions, and what the report says."""

from __future__ import annotations

import math
from typing import Any

import pytest

METRICS = """\
# HELP vllm:request_success_total Count of successfully processed requests.
# TYPE vllm:request_success_total counter
vllm:request_success_total{engine="0",finished_reason="stop",model_name="m"} 3.0
vllm:request_success_total{engine="0",finished_reason="length",model_name="m"} 5.0
vllm:request_success_created{engine="0",finished_reason="stop",model_name="m"} 1.7e+09
vllm:generation_tokens_total{engine="0",model_name="m"} 640.0
vllm:prompt_tokens_total{engine="0",model_name="m"} 12000.0
vllm:prompt_tokens_by_source_total{engine="0",model_name="m",source="local_compute"} 9000.0
vllm:prefix_cache_queries_total{engine="0",model_name="m"} 12000.0
vllm:prefix_cache_hits_total{engine="0",model_name="m"} 3000.0
"""


@pytest.fixture
def bh(bench):
    return bench("bench_harness")


def _rollouts(*commands: list[str]) -> list[dict[str, Any]]:
    return [{"commands": c, "exit_status": "Submitted", "record": None} for c in commands]


def _arm(bh, tokens: int, seconds: float, commands: list[list[str]]) -> dict[str, Any]:
    counts = {
        "calls": 8,
        "prompt_tokens": 1000,
        "generated_tokens": tokens,
        "cache_queries": 1000,
        "cache_hits": 250,
    }
    return bh.arm_figures(seconds, _rollouts(*commands), counts)


def test_arms_alternate_abba(bh) -> None:
    orders = [bh.arm_order(i) for i in range(4)]
    assert orders == [("direct", "endpoint"), ("endpoint", "direct")] * 2
    firsts = [order[0] for order in orders]
    assert firsts.count("direct") == firsts.count("endpoint")  # each arm first equally often


def test_vllm_counters_sum_labels_and_skip_the_rest(bh) -> None:
    found = bh.prometheus_counters(METRICS)
    assert found == {
        "calls": 8.0,  # both finish reasons; the `_created` sample is not a count
        "prompt_tokens": 12000.0,  # not the by-source breakdown
        "generated_tokens": 640.0,
        "cache_queries": 12000.0,
        "cache_hits": 3000.0,
    }
    assert bh.prometheus_counters("# nothing here\n") == dict.fromkeys(bh.COUNTERS, 0.0)
    assert bh.counted(
        {"calls": 3.0, "generated_tokens": 10.0}, {"calls": 8.0, "generated_tokens": 650.0}
    ) == {
        "calls": 5,
        "generated_tokens": 640,
    }


def test_an_arm_is_counted_by_vllm(bh) -> None:
    figures = _arm(bh, tokens=500, seconds=10.0, commands=[["ls", "cat x"], []])
    assert figures["tokens_per_s"] == 50.0 and figures["rollouts_per_s"] == 0.2
    assert figures["calls"] == 8 and figures["generated_tokens"] == 500 and figures["commands"] == 2
    assert figures["cached_prompt_share"] == 0.25 and figures["exit_statuses"] == ["Submitted"] * 2
    warm = bh.arm_figures(3.0, _rollouts([]), None)  # the untimed warm-up: no counters read
    assert set(warm) == {"seconds", "rollouts"}


def test_repetitions_give_medians_spreads_and_paired_ratios(bh) -> None:
    same = [["ls"], ["cat a"]]
    reps = [
        {
            "order": ["direct", "endpoint"],
            "direct": _arm(bh, 400, 10, same),
            "endpoint": _arm(bh, 380, 10, same),
        },
        {
            "order": ["endpoint", "direct"],
            "direct": _arm(bh, 500, 10, same),
            "endpoint": _arm(bh, 500, 10, same),
        },
        {
            "order": ["direct", "endpoint"],
            "direct": _arm(bh, 600, 10, same),
            "endpoint": _arm(bh, 540, 10, same),
        },
    ]
    s = bh.summarize(reps)
    assert s["direct"]["tokens_per_s"] == {"median": 50.0, "min": 40.0, "max": 60.0}
    assert s["endpoint"]["tokens_per_s"] == {"median": 50.0, "min": 38.0, "max": 54.0}
    ratio = s["tokens_per_s_ratio"]
    assert ratio["of_medians"] == 1.0
    assert ratio["per_repetition"] == [0.95, 1.0, 0.9] and (ratio["min"], ratio["max"]) == (0.9, 1.0)
    assert s["direct"]["calls"] == [8, 8, 8] and s["endpoint"]["commands"] == [2, 2, 2]
    assert s["same_commands"] is True
    reps[1]["endpoint"] = _arm(bh, 500, 10, [["ls"], ["cat b"]])
    assert bh.summarize(reps)["same_commands"] is False
    assert math.isnan(bh.paired_ratios([1.0], [0.0])[0])


def _result(bh, policy: str | None, commands: list[list[str]], grpo: bool = True) -> dict[str, Any]:
    reps = [
        {
            "order": list(bh.arm_order(i)),
            "direct": _arm(bh, 400, 10, commands),
            "endpoint": _arm(bh, 420, 10, commands),
        }
        for i in range(3)
    ]
    throughput = {
        "policy": policy,
        "domain": "swe",
        "rollouts": len(commands),
        "concurrency": 4,
        "max_calls": 4,
        "repetitions": 3,
        **bh.summarize(reps),
        "merged_share": None,
        "delivered_share": 0.4,
        "endpoint_segments": 24,
        "endpoint_harness_calls": 24,
        "per_repetition": reps,
    }
    result: dict[str, Any] = {"throughput": throughput}
    if grpo:
        result["grpo"] = {
            "seconds": 200.0,
            "rollouts": 4,
            "reward": 0.0,
            "mismatch": {"mean_abs_diff": 2e-5, "tokens": 384},
        }
    return result


def test_the_report_says_the_base_model_only_makes_format_errors(bh) -> None:
    result = _result(bh, None, [[], []])
    for text in (bh.summary(result), bh.render(result)):
        assert "base model" in text and "every call is a format error" in text
        assert "0 commands typed in 24 endpoint calls" in text
    line = bh.summary(result)
    assert "3 alternated repetitions" in line and "prefix cache emptied before each arm" in line
    assert (
        "endpoint/direct 1.05 (per repetition 1.05-1.05)" in line
        and "same commands in both arms: yes" in line
    )
    assert "log-prob mismatch 2.00e-05 over 384 tokens" in line
    shown = bh.render(result)
    assert shown.count("repetition ") >= 3 and "min-max" in shown and "ratio of medians" in shown
    trained = _result(bh, "/runs/x/policies/weights-v9", [["ls"]], grpo=False)
    assert "format error" not in bh.summary(trained) and "3 commands typed" in bh.summary(trained)
    assert "GRPO step: not run" in bh.render(trained)


def test_options_and_refusals(bh, tmp_path, capsys) -> None:
    defaults = bh.parse_options([])
    assert (defaults.repetitions, defaults.rollouts, defaults.policy, defaults.no_grpo) == (4, 4, None, False)
    assert defaults.repetitions >= bh.MIN_RECORDED_REPETITIONS
    # Refused before anything starts: too few repetitions to record, a directory that is no checkpoint.
    assert bh.main(as_json=True, argv=["--repetitions", "2"]) == 2
    assert "3+ alternated repetitions" in capsys.readouterr().err
    assert bh.main(argv=["--policy", str(tmp_path), "--repetitions", "1"]) == 2
    assert "not a checkpoint" in capsys.readouterr().err


def test_a_policy_trained_through_a_harness_runs_through_it(bh, tmp_path) -> None:
    from nemo_gym_prorl.training.config import load_train_config
    from nemo_gym_prorl.training.loop import write_policy_settings

    domain, harness, rows = bh.plan(None, 3)
    assert (domain, harness, len(rows)) == ("swe", bh.HARNESS, 3)
    policies = tmp_path / "policies"
    write_policy_settings(policies, load_train_config("harness_math", []))
    domain, harness, rows = bh.plan(policies / "weights-v1", 2)
    assert domain == "math" and harness["name"] == "mini_swe_agent" and len(rows) == 2
    assert harness["config"].endswith("mini_swe_agent_math.yaml")
