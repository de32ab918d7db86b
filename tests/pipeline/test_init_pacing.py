# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""A burst of rollouts starts no faster than the event loop can drive them: while the loop runs
late, INIT starts nothing new (queue time, not active time), and starts again once it is calm."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from nemo_gym_prorl import latency
from nemo_gym_prorl.pipeline import JobSpec, JobState


@pytest.fixture(autouse=True)
def calm_afterwards() -> Iterator[None]:
    yield
    latency.forget_loop_lag()


async def test_no_rollout_starts_while_the_loop_runs_late_and_they_start_once_it_is_calm(
    make_pipeline: Any,
) -> None:
    pipeline, handler = await make_pipeline()
    latency.note_loop_lag(0.5)  # the monitor's last tick: the loop is far behind
    ids = pipeline.submit([JobSpec(task="s") for _ in range(3)])
    await asyncio.sleep(0.3)
    assert not handler.live, "no sandbox was opened while the loop lagged"
    assert all(pipeline.get(i).state is JobState.QUEUED for i in ids)
    for _ in range(5):
        latency.note_loop_lag(0.001)  # calm ticks push the late one out of the recent window
    results, pending = await pipeline.wait(ids, timeout=10)
    assert not pending and all(r.state is JobState.DONE for r in results)
    assert all(r.timing.init_wait >= 0.25 for r in results), "the pause counted as INIT queue time"
    assert all(r.timing.counted_elapsed < 0.25 for r in results), "and not as the jobs' active time"


async def test_pacing_off_starts_rollouts_whatever_the_lag(make_pipeline: Any) -> None:
    pipeline, _ = await make_pipeline(init_pace_lag_s=None)
    latency.note_loop_lag(0.5)
    results, pending = await pipeline.wait(pipeline.submit([JobSpec(task="s")]), timeout=5)
    assert not pending and results[0].state is JobState.DONE


async def test_pacing_never_stops_a_rollout_for_good() -> None:
    latency.note_loop_lag(1.0)
    waited = asyncio.get_running_loop().time()
    await latency.wait_for_calm_loop(0.05, at_most_s=0.2)
    assert asyncio.get_running_loop().time() - waited >= 0.2
