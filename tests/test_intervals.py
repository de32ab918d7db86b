# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Reward intervals stay honest at 0 and 1: a policy that scored 0/64 is not certain to score 0,
and a paired gain of nothing over nothing is not a gain of exactly 0 either."""

from __future__ import annotations

import random

import pytest

from nemo_gym_prorl.intervals import Interval, paired_gain, wilson


def test_a_mean_reward_of_zero_has_a_wilson_interval_above_zero() -> None:
    interval = Interval.of([0.0] * 64)
    assert (interval.mean, interval.low, interval.method) == (0.0, 0.0, "wilson")
    assert interval.high == pytest.approx(0.0565, abs=1e-3)  # Wald would read [0.00, 0.00]


def test_a_perfect_score_has_a_wilson_interval_below_one() -> None:
    interval = Interval.of([1.0] * 64)
    assert interval.high == 1.0 and interval.low == pytest.approx(1 - 0.0565, abs=1e-3)


def test_wilson_matches_the_textbook_values() -> None:
    low, high = wilson(0.5, 100)
    assert (low, high) == pytest.approx((0.4038, 0.5962), abs=1e-4)


def test_rewards_outside_zero_one_get_a_normal_interval() -> None:
    interval = Interval.of([2.0, 4.0, 6.0])
    assert interval.method == "normal" and interval.low < 4.0 < interval.high


def test_a_paired_gain_of_nothing_over_nothing_is_uncertain_both_ways() -> None:
    gain = paired_gain([0.0] * 64, [0.0] * 64)
    assert gain.mean == 0.0 and gain.method == "newcombe_paired"
    assert gain.low < -0.05 and gain.high > 0.05


@pytest.mark.parametrize(
    "both, lost, gained",
    [(0.6, 0.1, 0.1), (0.05, 0.02, 0.1), (0.3, 0.2, 0.2)],
)
def test_the_paired_interval_covers_the_true_gain_about_95_percent_of_the_time(
    both: float, lost: float, gained: float
) -> None:
    rng = random.Random(7)
    truth, covered, trials = gained - lost, 0, 600
    for _ in range(trials):
        before, after = [], []
        for _ in range(64):
            u = rng.random()
            pair = (
                (1.0, 1.0)
                if u < both
                else (1.0, 0.0)
                if u < both + lost
                else (0.0, 1.0)
                if u < both + lost + gained
                else (0.0, 0.0)
            )
            before.append(pair[0])
            after.append(pair[1])
        gain = paired_gain(before, after)
        covered += gain.low <= truth <= gain.high
    assert 0.92 <= covered / trials <= 0.98


def test_a_clear_paired_gain_excludes_zero_and_a_tie_does_not() -> None:
    assert paired_gain([0.0] * 40 + [1.0] * 24, [1.0] * 64).excludes_zero()
    assert not paired_gain([0.0, 1.0] * 32, [1.0, 0.0] * 32).excludes_zero()


def test_non_binary_rewards_get_a_reproducible_paired_bootstrap() -> None:
    before = [0.1 * (i % 5) for i in range(40)]
    after = [min(1.0, b + 0.3) for b in before]
    first, second = paired_gain(before, after), paired_gain(before, after)
    assert first.method == "paired_bootstrap" and first == second and first.low > 0


def test_paired_samples_of_different_lengths_are_refused() -> None:
    with pytest.raises(ValueError, match="differ in length"):
        paired_gain([1.0], [1.0, 0.0])
