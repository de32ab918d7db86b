# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""`prorl train`'s progress bar: the phases weighted by their seconds in the last recorded run,
each trainer step a share of its phase, and the time left from this run's own pace."""

from __future__ import annotations

import pytest

from nemo_gym_prorl.training import progress
from nemo_gym_prorl.training.config import load_train_config
from nemo_gym_prorl.training.loop import run_phases


def test_progress_is_the_recorded_runs_share_of_seconds_and_time_left_follows_this_runs_pace(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    now = [1000.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: now[0])
    lines: list[str] = []
    clock = progress.RunClock(
        lines.append, ["start", "sft", "grpo"], expected={"start": 10, "sft": 30, "grpo": 60}
    )
    with clock.timed("start"):
        now[0] += 20.0  # twice as slow as the recorded run
    assert clock.seconds == {"start": 20.0}
    assert lines[-1] == "[##------------------]  10% start done | 0 min elapsed, ~3 min left"  # 20 s * 9
    with clock.timed("sft"):
        now[0] += 60.0
    clock.within("grpo", 2, 4)  # half of the grpo phase: 10 + 30 + 30 of 100
    assert lines[-1].startswith("[##############------]  70% grpo step 2/4 | 1 min elapsed")
    assert clock.fraction() == pytest.approx(0.4)  # finished phases only


def test_a_run_without_a_recorded_run_of_its_name_is_weighted_by_the_default_runs_shape() -> None:
    clock = progress.RunClock(lambda _: None, run_phases(load_train_config("default")))
    assert clock.weights["grpo"] == progress.REFERENCE_SECONDS["grpo"]
    evaluated_once = load_train_config("default", ["evaluation.phases=[grpo]"])
    assert run_phases(evaluated_once) == [
        "start", "demonstrations", "sft", "merge_sft", "grpo", "eval_grpo", "measure_grpo"
    ]  # fmt: skip
    unmeasured = load_train_config("default", ["evaluation.phases=[grpo]", "evaluation.measure=null"])
    assert run_phases(unmeasured)[-1] == "eval_grpo"


def test_a_phase_cut_short_is_timed_but_not_reported_done() -> None:
    lines: list[str] = []
    clock = progress.RunClock(lines.append, ["start", "grpo"], expected={"start": 1, "grpo": 1})
    with pytest.raises(KeyboardInterrupt), clock.timed("grpo"):
        raise KeyboardInterrupt  # a signal in the middle of GRPO
    assert "grpo" in clock.seconds and lines == []
