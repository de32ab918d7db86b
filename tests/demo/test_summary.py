# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The demo's per-domain summary: turns, tool calls per tool, tool errors, stop reasons, rewards
and informative groups, as data and as the terminal table."""

from __future__ import annotations

from typing import Any

from nemo_gym_prorl.demo.report import rollouts_of
from nemo_gym_prorl.demo.summary import summarize, summary_table
from nemo_gym_prorl.pipeline.groups import GroupResult, GroupStatus
from nemo_gym_prorl.pipeline.job import JobResult, JobState, Trajectory


def step(name: str, error: bool = False) -> dict[str, Any]:
    return {"name": name, "is_error": error}


def result(reward: float, source: str, turns: int, steps: list[dict[str, Any]], stop: str) -> JobResult:
    return JobResult(
        id=f"j{reward}{turns}",
        task=source,
        state=JobState.DONE,
        submitted_at=0.0,
        finished_at=1.0,
        reward=reward,
        trajectory=Trajectory(
            stop_reason=stop,
            num_turns=turns,
            steps=steps,
            generated_tokens=7,
            decoding={"constrained": True},
        ),
    )


def group(source: str, samples: list[JobResult], status: GroupStatus) -> GroupResult:
    return GroupResult(
        group_id=source,
        prompt_key=source,
        status=status,
        batch_index=0,
        started_batch=0,
        rewards=[s.reward or 0.0 for s in samples],
        rollouts_spent=len(samples),
        row={"data_source": source},
        samples=samples,
    )


JUDGED = [
    (
        group(
            "prorl_math",
            [
                result(1.0, "prorl_math", 3, [step("ipython"), step("ipython", error=True)], "answered"),
                result(0.0, "prorl_math", 4, [step("ipython"), step("ipython"), step("submit")], "submitted"),
            ],
            GroupStatus.INFORMATIVE,
        ),
        True,
    ),
    (
        group(
            "prorl_swe",
            [result(0.0, "prorl_swe", 6, [step("bash"), step("editor"), step("bash")], "length")],
            GroupStatus.UNIFORM,
        ),
        False,
    ),
]
DOMAINS = {"prorl_math": "math", "prorl_swe": "swe"}


def test_each_domain_counts_turns_calls_per_tool_errors_stops_rewards_and_groups() -> None:
    math, swe, overall = summarize(rollouts_of(JUDGED, DOMAINS), JUDGED, DOMAINS)
    assert (math.domain, math.rollouts, math.mean_turns) == ("math", 2, 3.5)
    assert math.tool_calls == {"ipython": 4, "submit": 1} and math.mean_tool_calls == 2.5
    assert math.tool_errors == 1
    assert math.stop_reasons == {"answered": 1, "submitted": 1}
    assert math.mean_reward == 0.5 and (math.informative_groups, math.groups) == (1, 1)
    assert math.constrained_rollouts == 2 and math.generated_tokens == 14
    assert swe.tool_calls == {"bash": 2, "editor": 1} and swe.stop_reasons == {"length": 1}
    assert (swe.informative_groups, swe.groups) == (0, 1)
    assert overall.domain == "all" and overall.rollouts == 3
    assert overall.mean_turns == (3 + 4 + 6) / 3 and overall.total_tool_calls == 8
    assert (overall.informative_groups, overall.groups) == (1, 2)


def test_the_table_shows_a_row_per_domain_and_the_overall_row() -> None:
    table = summary_table(summarize(rollouts_of(JUDGED, DOMAINS), JUDGED, DOMAINS))
    math = next(line for line in table.splitlines() if line.startswith("math"))
    assert math.split()[:7] == ["math", "2", "3.50", "2.50", "1", "0.500", "1/1"]
    assert "ipython:4 submit:1" in math and "answered:1 submitted:1" in math
    overall = next(line for line in table.splitlines() if line.startswith("all"))
    assert overall.split()[:3] == ["all", "3", "4.33"]


def test_a_single_domain_has_no_overall_row() -> None:
    only_math = JUDGED[:1]
    assert [s.domain for s in summarize(rollouts_of(only_math, DOMAINS), only_math, DOMAINS)] == ["math"]
