# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The demo's report: stage spans rebuilt from timings, the per-domain table, the PNG."""

from __future__ import annotations

from pathlib import Path

from nemo_gym_prorl.demo.report import plot_timeline, rollouts_of, stage_spans
from nemo_gym_prorl.pipeline.groups import GroupResult, GroupStatus
from nemo_gym_prorl.pipeline.job import JobResult, JobState, Timing, Trajectory


def result(reward: float, start: float) -> JobResult:
    timing = Timing(init_wait=1.0, init_time=0.5, run_wait=0.0, run_time=2.0, eval_wait=0.25, eval_time=1.0)
    return JobResult(
        id=f"j{start}",
        task="prorl_math",
        state=JobState.DONE,
        submitted_at=start,
        finished_at=start + 4.75,
        reward=reward,
        trajectory=Trajectory(generated_tokens=10),
        timing=timing,
    )


def group(rewards: list[float], status: GroupStatus) -> GroupResult:
    return GroupResult(
        group_id="g",
        prompt_key="k",
        status=status,
        batch_index=0,
        started_batch=0,
        rewards=rewards,
        rollouts_spent=len(rewards),
        row={"data_source": "prorl_math"},
        samples=[result(r, 100.0 + i) for i, r in enumerate(rewards)],
    )


def test_stage_spans_follow_waits_and_active_times() -> None:
    spans = stage_spans(result(1.0, 100.0))
    assert spans == [
        ("queue", 100.0, 101.0),
        ("init", 101.0, 101.5),
        ("run", 101.5, 103.5),
        ("queue", 103.5, 103.75),
        ("eval", 103.75, 104.75),
    ]


def test_timeline_png_is_written(tmp_path: Path) -> None:
    judged = [(group([1.0, 0.0], GroupStatus.INFORMATIVE), True)]
    png = plot_timeline(rollouts_of(judged, {"prorl_math": "math"}), tmp_path / "t.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_timeline_can_colour_rollouts_by_the_node_they_ran_on(tmp_path: Path) -> None:
    from nemo_gym_prorl.demo.report import node_of
    from nemo_gym_prorl.pipeline.job import Attempt

    rollouts = rollouts_of([(group([1.0, 0.0], GroupStatus.INFORMATIVE), True)], {"prorl_math": "math"})
    rollouts[0].result.attempts = [Attempt(node="aaaa1111", lost="died"), Attempt(node="bbbb2222")]
    assert node_of(rollouts[0].result) == "bbbb2222"  # where it finished, not where it was lost
    assert node_of(rollouts[1].result) == "local"
    png = plot_timeline(rollouts, tmp_path / "nodes.png", colour_by="node")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
