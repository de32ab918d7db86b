# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""What a server's token ids and log-probs must be before a reply becomes a generation: ids are
integers (JSON's true is not 1), log-probs finite numbers (an integer counts, as float)."""

from __future__ import annotations

import math

import pytest

from nemo_gym_prorl.llm.dialects.replies import check_log_probs, check_token_ids


def test_token_ids_are_a_list_of_integers() -> None:
    assert check_token_ids([0, 151643, 7], "ids") == [0, 151643, 7]
    assert check_token_ids([], "ids") == []


@pytest.mark.parametrize("bad", [[1, True], [1, 2.0], [1, "2"], [None], (1, 2), {"a": 1}, "12"])
def test_anything_else_is_refused_as_token_ids(bad: object) -> None:
    with pytest.raises(ValueError, match="ids must be a list of integers"):
        check_token_ids(bad, "ids")


def test_log_probs_are_finite_numbers_as_floats() -> None:
    out = check_log_probs([-0.5, 0, -3], "lp")
    assert out == [-0.5, 0.0, -3.0] and all(type(v) is float for v in out)


@pytest.mark.parametrize("bad", [[-0.1, False], [-0.1, "x"], [None], (-0.1,)])
def test_what_is_not_a_list_of_numbers_is_refused_as_log_probs(bad: object) -> None:
    with pytest.raises(ValueError, match="lp must be a list of numbers"):
        check_log_probs(bad, "lp")


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_a_log_prob_that_is_not_finite_is_refused(bad: float) -> None:
    with pytest.raises(ValueError, match="NaN or infinite"):
        check_log_probs([-0.1, bad], "lp")
