# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Staleness of a trajectory against the trainer's version, and the `max_staleness` bound."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from nemo_gym_prorl.llm.staleness import StalenessPolicy, staleness


def test_staleness_is_the_trainer_version_minus_the_oldest_version_used() -> None:
    assert staleness(5, [3, 4]) == 2
    assert staleness(4, [4]) == 0


def test_the_base_model_counts_as_version_zero() -> None:
    assert staleness(2, [None, 1]) == 2


def test_staleness_is_unknown_without_a_trainer_version_or_turns() -> None:
    assert staleness(None, [1]) is None
    assert staleness(3, []) is None


def test_a_trajectory_within_the_bound_is_kept() -> None:
    verdict = StalenessPolicy(max_staleness=2, action="drop").judge(5, [3])
    assert (verdict.staleness, verdict.action) == (2, "keep")


@pytest.mark.parametrize("action", ["rerun", "drop", "flag"])
def test_a_trajectory_past_the_bound_gets_the_configured_action(action: str) -> None:
    verdict = StalenessPolicy.model_validate({"max_staleness": 1, "action": action}).judge(5, [3, 5])
    assert (verdict.staleness, verdict.action) == (2, action)


def test_no_bound_keeps_everything() -> None:
    assert StalenessPolicy().judge(100, [None]).action == "keep"


def test_a_bad_setting_is_a_clear_error() -> None:
    with pytest.raises(ValidationError):
        StalenessPolicy.model_validate({"max_staleness": -1})
    with pytest.raises(ValidationError):
        StalenessPolicy.model_validate({"action": "ignore"})
