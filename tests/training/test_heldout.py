# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The seed split: training and held-out tasks come from disjoint seed ranges, and no training
task repeats a held-out question."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from nemo_gym_prorl.training.heldout import DEFAULT_FAMILIES, DEFAULT_RL_FAMILIES, SeedSplit

SPLIT = SeedSplit()


def question(row: dict) -> str:
    return row["responses_create_params"]["input"][-1]["content"]


def test_the_heldout_set_is_64_demonstrated_then_64_rl_family_math_tasks() -> None:
    rows = SPLIT.heldout_rows()
    assert len(rows) == 128
    assert rows == SeedSplit().heldout_rows()  # the same set, whoever asks
    assert {SPLIT.family(r) for r in rows[:64]} == set(DEFAULT_FAMILIES) == SPLIT.demonstrated
    assert {SPLIT.family(r) for r in rows[64:]} == set(DEFAULT_RL_FAMILIES)
    assert {r["data_source"] for r in rows} == {"prorl_math"}
    assert {r["split"] for r in rows} == {"heldout"}
    assert all(r["expected_answer"] for r in rows)
    assert len({r["task_id"] for r in rows}) == 128


def test_grpo_trains_on_the_rl_families_only_and_never_on_a_heldout_question() -> None:
    rows = SPLIT.grpo_rows(10, 4, demonstrations_tried=41)
    assert {SPLIT.family(r) for r in rows} == set(DEFAULT_RL_FAMILIES)
    heldout = {(SPLIT.family(r), question(r)) for r in SPLIT.heldout_rows()}
    assert not heldout & {(SPLIT.family(r), question(r)) for r in rows}
    assert all(r["reasoning_gym"]["seed"] < SPLIT.heldout_seed_start for r in rows)


def test_rehearsal_puts_demonstrated_tasks_the_demonstrations_never_tried_in_every_step() -> None:
    rows = SPLIT.grpo_rows(3, 6, demonstrations_tried=40, rehearsal=2)
    steps = [rows[i : i + 6] for i in range(0, 18, 6)]
    for step in steps:
        assert [SPLIT.family(r) in SPLIT.demonstrated for r in step] == [False] * 4 + [True] * 2
    assert [r for step in steps for r in step[4:]] == SPLIT.train_rows(6, start=40)
    assert [r for step in steps for r in step[:4]] == SPLIT.grpo_rows(3, 4, demonstrations_tried=40)
    with pytest.raises(ValueError, match="rehearsal"):
        SPLIT.grpo_rows(1, 2, demonstrations_tried=0, rehearsal=2)


def test_without_rl_families_grpo_continues_after_the_demonstrations_tasks() -> None:
    split = SeedSplit(rl_families=())
    assert split.grpo_rows(2, 2, demonstrations_tried=8) == split.train_rows(4, start=8)
    assert len(split.heldout_rows()) == 64


def test_heldout_seeds_never_intersect_train_seeds() -> None:
    heldout = {(r["reasoning_gym"]["family"], r["reasoning_gym"]["seed"]) for r in SPLIT.heldout_rows()}
    train = [(r["reasoning_gym"]["family"], r["reasoning_gym"]["seed"]) for r in SPLIT.train_rows(2000)]
    assert len(train) == 2000
    assert not heldout & set(train)
    assert max(seed for _, seed in train) < SPLIT.heldout_seed_start <= min(seed for _, seed in heldout)


def test_no_training_task_asks_a_heldout_question() -> None:
    heldout = {(r["reasoning_gym"]["family"], question(r)) for r in SPLIT.heldout_rows()}
    train = SPLIT.train_rows(2000)
    assert not heldout & {(r["reasoning_gym"]["family"], question(r)) for r in train}
    # ... which needs the check: one-digit sums repeat, so some training seeds were skipped.
    last_seed = max(r["reasoning_gym"]["seed"] for r in train)
    assert len(train) < len(DEFAULT_FAMILIES) * (last_seed + 1)


def test_train_rows_are_a_stable_sequence_that_start_offsets_into() -> None:
    first = SPLIT.train_rows(12)
    assert SPLIT.train_rows(4, start=8) == first[8:]
    assert [r["reasoning_gym"]["family"] for r in first[:4]] == list(DEFAULT_FAMILIES)
    assert all(
        r["task_id"] == f"rg-{r['reasoning_gym']['family']}-s{r['reasoning_gym']['seed']}" for r in first
    )


def test_a_row_carries_the_task_inputs_a_program_reads() -> None:
    row = SPLIT.row("train", "gcd", 3)
    metadata = row["reasoning_gym"]["metadata"]
    assert all(str(n) in question(row) for n in metadata["numbers"])
    assert row["responses_create_params"]["input"][0]["role"] == "system"


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"heldout_size": 16}, "greater than or equal to 64"),
        ({"train_seed_start": 5, "heldout_seed_start": 5}, "must be below heldout_seed_start"),
        ({"families": ("gcd", "gcd")}, "families repeat"),
        ({"families": ("gsm_symbolic",)}, "families"),
        ({"families": ("gcd",), "rl_families": ("gcd",)}, "families"),
        ({"rl_families": ("chain_sum", "chain_sum")}, "families repeat"),
        ({"test_seed_start": 1_000_010}, "never share a seed"),
    ],
)
def test_a_split_that_could_leak_or_is_too_small_is_refused(fields: dict, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        SeedSplit(**fields)


def test_training_seeds_run_out_before_the_heldout_range() -> None:
    split = SeedSplit(families=("gcd",), train_seed_start=0, heldout_seed_start=3)
    assert [r["reasoning_gym"]["seed"] for r in split.iter_train_rows()] == [0, 1, 2]
    with pytest.raises(IndexError, match="held-out range"):
        split.recipe("train", 3)


def test_the_test_set_shares_no_seed_with_the_tuning_set_and_training_is_the_same_for_both() -> None:
    test = SeedSplit(heldout_set="test")
    tuning_seeds = {(r["reasoning_gym"]["family"], r["reasoning_gym"]["seed"]) for r in SPLIT.heldout_rows()}
    test_seeds = {(r["reasoning_gym"]["family"], r["reasoning_gym"]["seed"]) for r in test.heldout_rows()}
    assert len(test_seeds) == len(tuning_seeds) == 128 and not tuning_seeds & test_seeds
    assert min(seed for _, seed in test_seeds) == test.test_seed_start
    # Training skips both sets' questions, so which one a run evaluates on changes nothing it trains on.
    assert test.train_rows(40) == SPLIT.train_rows(40)
    every_heldout = {
        (r["reasoning_gym"]["family"], question(r)) for r in SPLIT.heldout_rows() + test.heldout_rows()
    }
    assert not {(r["reasoning_gym"]["family"], question(r)) for r in SPLIT.train_rows(200)} & every_heldout
