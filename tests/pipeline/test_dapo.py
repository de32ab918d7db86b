# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""DAPO dynamic sampling with asynchronous replenishment, over the real pipeline with per-sample
scripted handlers (pure asyncio: each test runs in well under a second or two)."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from support.scripted_groups import GroupScriptedHandler

from nemo_gym_prorl.pipeline import HandlerRegistry, Pipeline, PipelineConfig, Stage
from nemo_gym_prorl.pipeline.dapo import BatchFailedError, DapoConfig, DapoScheduler
from nemo_gym_prorl.pipeline.groups import GroupStatus, UniformRule, judge, reward_std
from nemo_gym_prorl.pipeline.prompt_source import CyclingSource, JsonlSource, RowsSource


def informative(key: str, g: int = 4, run_s: float = 0.01, **extra: Any) -> dict[str, Any]:
    return {"task_id": key, "samples": [{"reward": float(k % 2), "run_s": run_s, **extra} for k in range(g)]}


def uniform(key: str, g: int = 4, reward: float = 1.0, run_s: float = 0.01) -> dict[str, Any]:
    return {"task_id": key, "samples": [{"reward": reward, "run_s": run_s} for _ in range(g)]}


class CountingHandler(GroupScriptedHandler):
    """Remembers the most states alive at once (INIT done, not yet released)."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.max_live = 0

    async def init(self, job: Any) -> Any:
        state = await super().init(job)
        self.max_live = max(self.max_live, len(self.live))
        return state


class EvaluatedHandler(GroupScriptedHandler):
    """Remembers the task of every rollout evaluated, in order."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.evaluated: list[str] = []

    async def evaluate(self, job: Any, state: Any, trajectory: Any) -> Any:
        evaluation = await super().evaluate(job, state, trajectory)
        self.evaluated.append(job.instance["task_id"])
        return evaluation


@pytest.fixture
async def make() -> Any:
    made: list[tuple[Pipeline, DapoScheduler]] = []

    async def build(
        rows: Any, *, workers: int = 32, handler: GroupScriptedHandler | None = None, **cfg: Any
    ) -> tuple[DapoScheduler, GroupScriptedHandler]:
        handler = handler or GroupScriptedHandler()
        registry = HandlerRegistry()
        registry.register("g", handler)
        pipeline = Pipeline(
            registry,
            PipelineConfig(
                init_workers=workers, run_workers=workers, eval_workers=workers, deadline_check_s=0.05
            ),
        )
        await pipeline.start()
        source = rows if hasattr(rows, "next_prompt") else RowsSource(rows)
        cfg.setdefault("group_size", 4)
        cfg.setdefault("task", "g")
        scheduler = DapoScheduler(pipeline, source, DapoConfig(**cfg))
        made.append((pipeline, scheduler))
        return scheduler, handler

    yield build
    for pipeline, scheduler in made:
        await scheduler.close()
        await pipeline.stop()


# -- the uniformity rule ------------------------------------------------------------------------
def test_uniform_rules() -> None:
    exact = UniformRule()
    assert exact.is_uniform([1.0, 1.0, 1.0]) and not exact.is_uniform([1.0, 1.0, 0.999])
    assert exact.is_uniform([0.5])  # one sample: no baseline, no signal
    loose = UniformRule(mode="std", eps=0.01)
    assert loose.is_uniform([1.0, 1.0, 0.999]) and not loose.is_uniform([1.0, 0.0])
    assert reward_std([0.0, 1.0]) == pytest.approx(0.7071, abs=1e-4)  # ddof=1, like torch.std
    assert judge([1.0, None, 0.0], exact)[0] is GroupStatus.INFORMATIVE  # masked sample ignored
    assert judge([1.0, None, None], exact)[0] is GroupStatus.FAILED  # fewer than 2 valid


# -- scheduling ---------------------------------------------------------------------------------
async def test_delivers_only_informative_groups_and_counts_spend(make: Any) -> None:
    rows = [uniform(f"u{i}") if i % 2 == 0 else informative(f"i{i}") for i in range(20)]
    scheduler, _ = await make(rows, batch_groups=3, max_prompts_in_flight=2)
    groups, stats = await scheduler.next_batch()
    assert len(groups) == 3 and stats.status == "complete"
    assert all(g.status is GroupStatus.INFORMATIVE and len(g.samples) == 4 for g in groups)
    assert all(g.prompt_key.startswith("i") for g in groups)
    assert all(len({s.metadata["dapo"]["sample"] for s in g.samples}) == 4 for g in groups)
    assert stats.uniform_groups >= 2  # the uniform prompts interleaved with them were judged
    judged = stats.informative_groups + stats.uniform_groups
    assert stats.rollouts_spent == 4 * judged
    assert stats.rollouts_per_informative_group == pytest.approx(stats.rollouts_spent / 3)


async def test_keeps_at_most_m_prompts_in_flight(make: Any) -> None:
    rows = [informative(f"i{i}", run_s=0.02) for i in range(30)]
    handler = CountingHandler()
    scheduler, _ = await make(rows, handler=handler, batch_groups=12, max_prompts_in_flight=3)
    _, stats = await scheduler.next_batch()
    assert stats.informative_groups == 12
    assert 0 < handler.max_live <= 3 * 4
    assert scheduler.prompts_in_flight <= 3


async def test_replenishes_around_a_straggler(make: Any) -> None:
    """One slow group must not hold the batch: its slot's neighbours keep being replaced."""
    slow = informative("slow")
    slow["samples"][0]["run_s"] = (
        60.0  # outlasts the batch however loaded the machine (cancelled at teardown)
    )
    rows = [slow] + [informative(f"i{i}") for i in range(20)]
    scheduler, _ = await make(rows, batch_groups=5, max_prompts_in_flight=2)
    started = time.monotonic()
    groups, stats = await scheduler.next_batch()
    assert time.monotonic() - started < 30  # long before the straggler ends
    assert "slow" not in {g.prompt_key for g in groups}
    assert stats.carried_prompts == 1 and stats.carried_finished_rollouts >= 3


async def test_rollouts_in_flight_bound_the_work_and_a_groups_early_finishers_make_room(make: Any) -> None:
    """R counts rollouts, not prompts: while the last sample of a group still runs, the room its
    finished siblings left goes to the next prompts, and never more than R run at once."""
    slow = informative("slow")
    # The straggler outlasts the batch on any machine, however loaded (it is cancelled at teardown):
    # what is measured is the room its siblings left, not a race against it.
    slow["samples"][0]["run_s"] = 60.0
    rows = [slow] + [informative(f"i{i}", run_s=0.05) for i in range(20)]
    handler = CountingHandler()
    scheduler, _ = await make(
        rows, handler=handler, batch_groups=6, max_prompts_in_flight=10, max_rollouts_in_flight=9
    )
    groups, stats = await scheduler.next_batch()
    assert stats.informative_groups == 6 and "slow" not in {g.prompt_key for g in groups}
    # The straggler alone (1) beside two whole groups (4 + 4): 9, never more.
    assert handler.max_live == 9


def test_a_rollout_limit_below_the_group_size_is_refused() -> None:
    with pytest.raises(ValidationError, match="no prompt could ever start"):
        DapoConfig(group_size=4, max_rollouts_in_flight=3)


async def test_carry_over_keeps_every_finished_rollout(make: Any) -> None:
    slow = informative("slow")
    slow["samples"][0]["run_s"] = 2.0  # outlasts the first batch, even on a loaded machine
    rows = [slow] + [informative(f"i{i}") for i in range(40)]
    handler = EvaluatedHandler()
    scheduler, _ = await make(rows, handler=handler, batch_groups=4, max_prompts_in_flight=3)
    _, s1 = await scheduler.next_batch()
    assert s1.discarded_finished_rollouts == 0 and s1.cancelled_rollouts == 0
    assert s1.carried_prompts >= 1
    deadline = time.monotonic() + 10  # the straggler finishes between batches
    while handler.evaluated.count("slow") < 4:
        assert time.monotonic() < deadline, "the straggler never finished"
        await asyncio.sleep(0.01)
    second, s2 = await scheduler.next_batch()
    carried = second[: s1.carried_prompts]  # groups completed in between are delivered first
    assert "slow" in {g.prompt_key for g in carried}
    assert all(g.carried_over and g.started_batch == 1 and g.batch_index == 2 for g in carried)
    assert s2.carried_groups_delivered >= 1 and s2.discarded_finished_rollouts == 0
    # Every rollout that finished is in a delivered group or still held for the next batch.
    finished = s1.rollouts_finished + s2.rollouts_finished
    held = s2.carried_finished_rollouts
    assert finished == s1.rollouts_spent + s2.rollouts_spent + held


async def test_cancel_mode_ends_redundant_jobs_and_counts_the_loss(make: Any) -> None:
    slow = informative("slow")
    slow["samples"][3]["run_s"] = 60.0
    rows = [slow] + [informative(f"i{i}") for i in range(10)]
    scheduler, handler = await make(rows, batch_groups=2, max_prompts_in_flight=2, on_ready="cancel")
    started = time.monotonic()
    _, stats = await scheduler.next_batch()
    assert time.monotonic() - started < 30  # the straggler was cancelled, not waited for
    assert stats.cancelled_rollouts == 1
    assert stats.discarded_finished_rollouts == 3  # the slow group's three finished samples
    assert stats.carried_prompts == 0 and scheduler.prompts_in_flight == 0
    assert not handler.live  # the cancelled job's sandbox state was released


async def test_carried_queued_jobs_are_requeued_ahead_of_new_prompts(make: Any) -> None:
    rows = [informative(f"i{i}", g=2, run_s=0.001, init_s=0.03) for i in range(10)]
    scheduler, handler = await make(rows, workers=1, group_size=2, batch_groups=1, max_prompts_in_flight=3)
    _, s1 = await scheduler.next_batch()
    assert s1.requeued_jobs >= 2  # the other prompts' jobs were still waiting for INIT
    _, s2 = await scheduler.next_batch(3)  # the two carried groups, then a new prompt's
    order = handler.entered[Stage.INIT]
    requeued = [i for i, job in enumerate(order) if "-q" in job]
    batch2_new = [i for i, job in enumerate(order) if job.startswith(f"{scheduler.id}-4-")]
    assert requeued and batch2_new and max(requeued) < min(batch2_new)
    assert s2.discarded_finished_rollouts == 0


async def test_infrastructure_failures_are_retried_not_read_as_zero(make: Any) -> None:
    flaky = informative("flaky")
    flaky["samples"][0]["fail_attempts"] = 1  # first attempt dies in RUN
    flaky["samples"][1]["mask_attempts"] = 1  # first attempt's evaluator infrastructure fails
    scheduler, _ = await make([flaky], batch_groups=1, max_prompts_in_flight=1)
    groups, stats = await scheduler.next_batch()
    (group,) = groups
    assert group.retries == 2 and stats.retries == 2
    assert group.rewards == [0.0, 1.0, 0.0, 1.0] and not any(group.masked)
    assert group.rollouts_spent == 6  # 4 samples + 2 failed attempts
    assert any("critical_error=run" in f for f in group.failures)
    assert any("mask_sample" in f for f in group.failures)


async def test_persistent_failures_fail_or_mask_the_group(make: Any) -> None:
    def broken(key: str) -> dict[str, Any]:
        row = informative(key, g=3)
        row["samples"][2]["mask_attempts"] = 99
        return row

    scheduler, _ = await make([broken("a")], group_size=3, batch_groups=1, max_sample_retries=1)
    groups, stats = await scheduler.next_batch()
    assert not groups and stats.status == "exhausted" and stats.failed_groups == 1

    masked, _ = await make(
        [broken("b")], group_size=3, batch_groups=1, max_sample_retries=1, on_sample_failure="mask"
    )
    (group,), _ = await masked.next_batch()
    assert group.status is GroupStatus.INFORMATIVE and group.masked == [False, False, True]
    assert group.rewards == [0.0, 1.0, None]


async def test_too_many_failed_groups_fail_the_batch(make: Any) -> None:
    rows = [{"task_id": f"x{i}", "samples": [{"fail_attempts": 99}] * 2} for i in range(10)]
    scheduler, handler = await make(
        rows, group_size=2, batch_groups=2, max_failed_groups=3, max_sample_retries=0
    )
    with pytest.raises(BatchFailedError) as info:
        await scheduler.next_batch()
    assert info.value.stats.status == "failed" and info.value.stats.failed_groups == 3
    assert scheduler.prompts_in_flight == 0 and not handler.live


async def test_unknown_task_fails_the_batch_with_a_reason(make: Any) -> None:
    scheduler, _ = await make([informative("a")], task="nope", batch_groups=1)
    with pytest.raises(BatchFailedError, match="unknown task 'nope'"):
        await scheduler.next_batch()


async def test_streaming_yields_groups_as_they_complete_and_aclose_cancels(make: Any) -> None:
    rows = [uniform("u0"), informative("fast", run_s=0.01), informative("slow", run_s=0.3)]
    rows += [informative(f"i{i}", run_s=0.3) for i in range(5)]
    scheduler, _ = await make(rows, batch_groups=4, max_prompts_in_flight=3)
    events = []
    stream = scheduler.stream_batch()
    async for event in stream:
        events.append(event)
        if event.type == "group":
            break
    await stream.aclose()
    assert [e.type for e in events] == ["dropped", "group"]
    assert events[0].group is not None and events[0].group.samples == []  # summaries only
    assert events[1].group is not None and events[1].group.prompt_key == "fast"
    assert scheduler.history[-1].status == "cancelled"
    assert scheduler.history[-1].carried_prompts >= 1  # carry-over applies to a cancelled batch too
    _, stats = await scheduler.next_batch(1)  # and the scheduler is usable again
    assert stats.status == "complete"


async def test_one_batch_at_a_time(make: Any) -> None:
    scheduler, _ = await make([informative(f"i{i}", run_s=0.05) for i in range(4)], batch_groups=1)
    stream = scheduler.stream_batch()
    await anext(stream)
    with pytest.raises(RuntimeError, match="already has a batch"):
        await anext(scheduler.stream_batch())
    await stream.aclose()


# -- prompt sources -----------------------------------------------------------------------------
def _drain(source: Any) -> list[Any]:
    out = []
    while (p := source.next_prompt()) is not None:
        out.append(p)
    return out


def test_rows_source_from_iterator() -> None:
    source = RowsSource(iter([{"task_id": "a"}, {"x": 1}]))
    prompts = _drain(source)
    assert [p.key for p in prompts] == ["a", "1"]
    assert source.next_prompt() is None and source.position()["exhausted"]


def test_jsonl_source_is_lazy_and_names_bad_lines(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text(json.dumps({"task_id": "a"}) + "\n\n" + "{broken\n")
    source = JsonlSource(path)
    assert source.next_prompt().key == "a"  # type: ignore[union-attr]
    with pytest.raises(ValueError, match=r"d.jsonl:3"):
        source.next_prompt()
    with pytest.raises(FileNotFoundError):
        JsonlSource(tmp_path / "missing.jsonl")


def test_cycling_source_epochs_shuffle_and_resume(tmp_path: Path) -> None:
    rows = [{"task_id": str(i)} for i in range(5)]
    two = _drain(CyclingSource(rows, epochs=2, shuffle_seed=7))
    assert len(two) == 10 and [p.epoch for p in two] == [0] * 5 + [1] * 5
    first, second = [p.row["task_id"] for p in two[:5]], [p.row["task_id"] for p in two[5:]]
    assert sorted(first) == sorted(second) == [str(i) for i in range(5)]
    assert first != second  # a different order per epoch...
    again = [p.key for p in _drain(CyclingSource(rows, epochs=2, shuffle_seed=7))]
    assert again == [p.key for p in two]  # ...and the same one on every run
    resumed = _drain(CyclingSource(rows, epochs=2, shuffle_seed=7, start_epoch=1, start_index=3))
    assert [p.key for p in resumed] == [p.key for p in two[8:]]
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    forever = CyclingSource(path, epochs=None)
    keys = [forever.next_prompt().key for _ in range(12)]  # type: ignore[union-attr]
    assert keys[:6] == ["e0/0", "e0/1", "e0/2", "e0/3", "e0/4", "e1/0"] and keys[11] == "e2/1"
    assert CyclingSource([], epochs=None).next_prompt() is None  # empty: no endless loop


async def test_cycling_source_feeds_the_scheduler(make: Any) -> None:
    source = CyclingSource([informative("a"), uniform("b")], epochs=None)
    scheduler, _ = await make(source, batch_groups=3, max_prompts_in_flight=2)
    groups, stats = await scheduler.next_batch()
    assert [g.prompt_key.split("/")[1] for g in groups] == ["a", "a", "a"]
    assert len({g.prompt_key for g in groups}) == 3  # epoch-qualified keys
    assert stats.source["epoch"] >= 2
