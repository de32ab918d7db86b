# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Retention of finished results: bounded in count and in bytes, evicting fetched results before
unfetched ones, oldest first; an evicted result is remembered as spilled (a journal holds it) or
gone, and a fetch of a gone one is told which budget pushed it out and what to raise."""

from __future__ import annotations

import gc
import random
import tracemalloc

import pytest
from support.finished_results import finished_result

from nemo_gym_prorl.pipeline.job import Trajectory
from nemo_gym_prorl.pipeline.store import JobNotFoundError, ResultStore

result = finished_result


def store(*, max_results: int = 100, max_bytes: int = 1000, spills: bool = False) -> ResultStore:
    return ResultStore(max_results, max_tombstones=1000, max_bytes=max_bytes, spills=lambda: spills)


def held(s: ResultStore, *ids: str) -> list[str]:
    return [i for i in ids if i in s]


def test_the_byte_budget_evicts_the_oldest_results() -> None:
    s = store(max_bytes=1000)
    for i in range(4):
        s.put(result(f"r{i}"), size=300)
    assert held(s, "r0", "r1", "r2", "r3") == ["r1", "r2", "r3"]
    assert s.bytes == 900 and len(s) == 3 and s.evicted_total == 1


def test_fetched_results_go_before_unfetched_ones_oldest_first() -> None:
    s = store(max_bytes=1000)
    for i in range(3):
        s.put(result(f"r{i}"), size=300)
    s.get("r2")  # fetched: the first to go, though the newest
    s.get("r1")
    s.put(result("r3"), size=300)
    assert held(s, "r0", "r1", "r2", "r3") == ["r0", "r1", "r3"]
    s.put(result("r4"), size=300)  # the oldest fetched one next
    assert held(s, "r0", "r1", "r3", "r4") == ["r0", "r3", "r4"]
    s.put(result("r5"), size=300)  # none fetched left: the oldest unfetched one
    assert held(s, "r0", "r3", "r4", "r5") == ["r3", "r4", "r5"]


def test_the_count_budget_still_holds_whatever_the_bytes() -> None:
    s = store(max_results=2, max_bytes=1 << 30)
    for i in range(3):
        s.put(result(f"r{i}"), size=10)
    assert held(s, "r0", "r1", "r2") == ["r1", "r2"]


def test_a_result_bigger_than_the_budget_is_kept_until_the_next_one_and_evicts_no_other() -> None:
    s = store(max_bytes=1000)
    s.put(result("small"), size=300)
    s.put(result("huge"), size=5000)
    assert s.get("huge", mark_fetched=False) is not None  # accepted: a prompt fetch gets it
    assert held(s, "small", "huge") == ["small", "huge"]  # and it pushed nothing out
    s.put(result("next"), size=300)
    assert held(s, "small", "huge", "next") == ["small", "next"]  # it went first
    assert s.bytes == 600


def test_a_result_stored_again_under_its_id_replaces_the_old_one() -> None:
    s = store(max_bytes=1000)
    s.put(result("r"), size=400)
    s.put(result("r"), size=500)
    assert len(s) == 1 and s.bytes == 500


def test_without_a_journal_an_evicted_result_is_gone_and_the_error_names_the_budget() -> None:
    s = store(max_bytes=1000)
    s.put(result("old"), size=600)
    s.put(result("new"), size=600)
    assert s.was_evicted("old") and not s.spilled("old") and s.spilled_total == 0
    error = s.not_found("old")
    assert isinstance(error, JobNotFoundError) and error.evicted and error.budget == "bytes"
    assert "pipeline.max_retained_bytes" in str(error) and "1000 bytes" in str(error)

    by_count = store(max_results=1)
    by_count.put(result("old"), size=1)
    by_count.put(result("new"), size=1)
    assert "pipeline.max_retained_results (1 results" in str(by_count.not_found("old"))
    assert not store().not_found("never").evicted


def test_with_a_journal_an_evicted_result_is_spilled_with_its_digest() -> None:
    s = store(max_bytes=1000, spills=True)
    s.put(result("old", digest="abc"), size=600)
    s.put(result("new"), size=600)
    tomb = s.tombstone("old")
    assert s.spilled("old") and tomb is not None and tomb.digest == "abc" and tomb.budget == "bytes"
    assert (s.evicted_total, s.spilled_total) == (1, 1)
    s.mark_lost("old")  # the journal pruned it since
    assert not s.spilled("old") and s.not_found("old").evicted
    assert "journal.keep_results" in str(s.not_found("old"))


def test_a_result_is_held_as_its_json_which_is_all_it_costs_and_no_collector_pass_walks_it() -> None:
    rng = random.Random(0)
    messages = [
        {
            "role": "assistant",
            "content": "thinking " * 200,
            "prompt_token_ids": [rng.randrange(150_000) for _ in range(5000)],
            "generation_log_probs": [-3 * rng.random() for _ in range(1000)],
        }
        for _ in range(20)
    ]
    big = result("big").model_copy(
        update={"trajectory": Trajectory(messages=messages, extra_field="x" * 999)}
    )
    text = big.model_dump_json().encode()
    s = store(max_bytes=1 << 30)
    s.put(big.model_copy(update={"id": "warm-up"}))
    gc.collect()
    tracked = len(gc.get_objects())
    s.put(big.model_copy(update={"id": "counted"}))
    assert len(gc.get_objects()) - tracked < 5, "none of its lists is left for the collector to walk"
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        s.put(big)
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert held == pytest.approx(len(text), rel=0.05), "the budget counts what is held"
    assert s.size("big") == len(text) and s.bytes == sum(map(s.size, ("warm-up", "counted", "big")))
    assert s.get_json("big") == text and s.get("big") == big, "fetched whole"
    assert s.digest("big") == big.digest
