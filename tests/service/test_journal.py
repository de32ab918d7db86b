# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The service's journal: what it writes survives the process, each result is kept once, and a
service restarted on it serves what finished and runs again what was in flight.

The crash here is made in process (the first service's journal is closed under it, so nothing it
does afterwards reaches the file); `test_crash_recovery.py` kills a real `prorl serve` with -9.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest
from service_helpers import until
from support.finished_results import finished_result
from support.scripted_stages import ScriptedHandler

from nemo_gym_prorl.llm.access import LLMConfig
from nemo_gym_prorl.pipeline import HandlerRegistry, Job, JobResult, JobSpec, JobState, PipelineConfig
from nemo_gym_prorl.pipeline.dapo import DapoConfig
from nemo_gym_prorl.pipeline.store import result_json
from nemo_gym_prorl.service.batch_manager import BatchManager, BatchRequest, SourceSpec
from nemo_gym_prorl.service.journal import Journal, JournalConfig, JournalError, JournalStore, job_spec
from nemo_gym_prorl.service.recovery import Durability
from nemo_gym_prorl.service.stack import RolloutStack, StackConfig, build_stack


def job(job_id: str, **instance: object) -> Job:
    return Job(
        id=job_id,
        task="s",
        instance=dict(instance),
        sampling_params={},
        priority=0,
        active_time_s=30.0,
        wall_time_s=None,
        group_id=None,
        metadata={"k": job_id},
    )


def result(job_id: str, reward: float = 1.0) -> JobResult:
    return finished_result(job_id, reward=reward)


def test_what_is_written_is_read_back_after_reopening(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite3"
    store = JournalStore(path)
    store.apply([("jobs", [job("a", q=1), job("b", q=2), job("c", q=3)], 0), ("result", result("b", 0.5))])
    store.close()

    again = JournalStore(path)
    try:
        unfinished = again.unfinished()
        assert [u.spec.id for u in unfinished] == ["a", "c"]  # in the order they were accepted
        assert unfinished[0].spec.instance == {"q": 1} and unfinished[0].spec.metadata == {"k": "a"}
        assert unfinished[0].spec.budget.active_time_s == 30.0 and unfinished[0].runs == 1
        finished, evicted = again.finished(max_results=10, max_bytes=1 << 20)
        assert [(r.id, r.reward) for r in finished] == [("b", 0.5)] and evicted == []
    finally:
        again.close()


def test_a_result_recorded_twice_keeps_the_first(tmp_path: Path) -> None:
    store = JournalStore(tmp_path / "journal.sqlite3")
    try:
        store.apply([("jobs", [job("a")], 0)])
        assert store.record_result(result("a", 1.0)) is True
        assert store.record_result(result("a", 0.0)) is False
        store.apply([("result", result("a", 0.0))])  # through a batch too: ignored
        kept = store.result("a")
        assert kept is not None and kept.reward == 1.0
        assert store.unfinished() == []
    finally:
        store.close()


def test_a_job_taken_back_counts_its_runs_and_is_not_journaled_twice(tmp_path: Path) -> None:
    store = JournalStore(tmp_path / "journal.sqlite3")
    try:
        store.apply([("jobs", [job("a")], 0)])
        store.apply([("jobs", [job("a")], 0)])  # a client's retry of the same submit
        store.apply([("jobs", [job("a")], 1)])  # run again after a crash
        assert [(u.spec.id, u.runs) for u in store.unfinished()] == [("a", 2)]
    finally:
        store.close()


def test_one_journal_serves_one_service_at_a_time(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite3"
    first = JournalStore(path)
    with pytest.raises(JournalError, match="in use by another running service"):
        JournalStore(path)
    first.close()
    JournalStore(path).close()  # free again once the first is gone


def test_the_file_keeps_only_the_newest_results(tmp_path: Path) -> None:
    store = JournalStore(tmp_path / "journal.sqlite3", keep_results=10)
    try:
        for i in range(40):
            store.apply([("jobs", [job(f"j{i}")], 0), ("result", result(f"j{i}"))])
        finished, _ = store.finished(max_results=100, max_bytes=1 << 30)
        assert 10 <= len(finished) <= 11 and finished[-1].id == "j39"
        assert store.runs("j0") is None  # its job went with its result
    finally:
        store.close()


def test_reading_back_is_bounded_by_count_and_bytes(tmp_path: Path) -> None:
    store = JournalStore(tmp_path / "journal.sqlite3")
    try:
        store.apply([("result", result(f"j{i}")) for i in range(6)])
        finished, evicted = store.finished(max_results=4, max_bytes=1 << 20)
        assert [r.id for r in finished] == ["j2", "j3", "j4", "j5"] and evicted == ["j1", "j0"]
        finished, _ = store.finished(max_results=4, max_bytes=1)
        assert finished == []
    finally:
        store.close()


def test_reading_back_also_stays_within_the_memory_budget(tmp_path: Path) -> None:
    store = JournalStore(tmp_path / "journal.sqlite3")
    try:
        store.apply([("result", result(f"j{i}")) for i in range(6)])
        one = len(result_json(result("j0")))  # as the result store holds it
        finished, evicted = store.finished(
            max_results=10, max_bytes=1 << 20, max_memory_bytes=2 * one + one // 2
        )
        assert [r.id for r in finished] == ["j4", "j5"], (
            "the newest that fit in memory, however well they compress"
        )
        assert evicted == ["j3", "j2", "j1", "j0"]
    finally:
        store.close()


async def test_the_event_loop_side_commits_in_order_and_flush_waits_for_it(tmp_path: Path) -> None:
    journal = await Journal.open(tmp_path / "journal.sqlite3")
    journal.accepted([job(f"j{i}") for i in range(50)])
    for i in range(0, 50, 2):
        journal.settled(result(f"j{i}"))
    await journal.flush()
    unfinished = await journal.read(JournalStore.unfinished, journal.store)
    assert [u.spec.id for u in unfinished] == [f"j{i}" for i in range(1, 50, 2)]
    await journal.close()


async def test_a_result_settled_with_its_json_is_journaled_from_that_json(tmp_path: Path) -> None:
    journal = await Journal.open(tmp_path / "journal.sqlite3")
    settled = result("j0", 0.5)
    as_json = result_json(settled)  # made once, by the pipeline's result store
    journal.settled(settled, as_json)
    await journal.flush()
    assert await journal.result("j0") == settled
    await journal.close()


async def test_writes_whose_commit_failed_are_written_by_the_next_flush(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal = await Journal.open(tmp_path / "journal.sqlite3")
    real_apply = journal.store.apply

    def full_disk(writes: object) -> None:
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(journal.store, "apply", full_disk)
    journal.accepted([job("a")])
    with pytest.raises(JournalError, match="disk is full"):
        await journal.flush()  # the submit that waits on it is not answered as accepted
    monkeypatch.setattr(journal.store, "apply", real_apply)
    await journal.flush()  # nothing new queued: the failed writes are tried again
    unfinished = await journal.read(JournalStore.unfinished, journal.store)
    assert [u.spec.id for u in unfinished] == ["a"]
    await journal.close()


def test_auto_keeps_a_journal_per_port_under_prorl_home(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PRORL_HOME", str(tmp_path))
    assert JournalConfig().resolve(8000) == tmp_path / "service" / "journal-8000.sqlite3"
    assert JournalConfig().resolve(0) is None  # a random port: no client finds it again
    assert JournalConfig(path="none").resolve(8000) is None and JournalConfig(path=None).resolve(8000) is None
    assert JournalConfig(path=str(tmp_path / "j.db")).resolve(0) == tmp_path / "j.db"


def test_job_spec_round_trips_the_job() -> None:
    spec = job_spec(job("a", q=1))
    assert spec.id == "a" and spec.task == "s" and spec.instance == {"q": 1}


# -- a service restarted on the journal --------------------------------------------------------


def scripted_stack(path: Path, handler: ScriptedHandler) -> RolloutStack:
    def handlers(*_: object) -> HandlerRegistry:
        registry = HandlerRegistry()
        registry.register("s", handler)
        return registry

    config = StackConfig(
        llm=LLMConfig(health_path=None),
        pipeline=PipelineConfig(deadline_check_s=0.05),
        service={"require_backend": False},
        durability=Durability(journal=path, sandbox_root=path.parent / "sandboxes"),
    )
    return build_stack(config, handlers)


async def crash(stack: RolloutStack) -> None:
    """Die as `kill -9` would, as far as the journal can tell: nothing after this reaches it."""
    journal = stack.service.journal
    assert journal is not None
    stack.pipeline.journal = None
    stack.service.journal = None
    await journal.close()
    await stack.close()


async def test_a_restarted_service_serves_what_finished_and_runs_again_what_was_in_flight(
    tmp_path: Path,
) -> None:
    path = tmp_path / "journal.sqlite3"
    first = scripted_stack(path, ScriptedHandler(run_s=30))
    await first.start()
    quick = [JobSpec(id=f"quick-{i}", task="s", instance={"script": {"run_s": 0}}) for i in range(5)]
    slow = [JobSpec(id=f"slow-{i}", task="s", instance={"n": i}) for i in range(5)]
    await first.service.submit(quick + slow)
    await until(lambda: all(first.pipeline.get(s.id or "").state is JobState.DONE for s in quick))
    assert first.service.journal is not None
    await first.service.journal.flush()
    await crash(first)

    second = scripted_stack(path, ScriptedHandler(run_s=0))
    await second.start()
    try:
        assert second.recovered is not None and second.recovered.resumed_jobs == 5
        results, pending = await second.pipeline.wait([s.id or "" for s in quick + slow], timeout=10)
        assert pending == []
        by_id = {r.id: r for r in results}
        assert {i: r.resumed for i, r in by_id.items()} == {
            **{s.id: 0 for s in quick},
            **{s.id: 1 for s in slow},
        }
        assert all(r.state is JobState.DONE for r in results)
        # Submitted again under its id (a client retrying across the restart): the same job, once.
        assert await second.service.submit([slow[0]]) == ["slow-0"]
        assert second.pipeline.status().live_jobs == 0
    finally:
        await second.close()

    # Each job's result is in the journal once, and nothing is left to run.
    store = JournalStore(path)
    try:
        assert store.unfinished() == []
        finished, _ = store.finished(100, 1 << 30)
        assert sorted(r.id for r in finished) == sorted(s.id or "" for s in quick + slow)
    finally:
        store.close()


async def test_submit_answers_only_once_the_jobs_are_on_disk(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite3"
    stack = scripted_stack(path, ScriptedHandler(run_s=30))
    await stack.start()
    try:
        ids = await stack.service.submit([JobSpec(task="s", instance={"n": i}) for i in range(20)])
        # Read by another connection, as a restarted process would: already there.
        unfinished = await asyncio.to_thread(_read_unfinished_ids, path)
        assert unfinished == ids
    finally:
        await stack.close()


def _read_unfinished_ids(path: Path) -> list[str]:
    with sqlite3.connect(path) as db:
        return [row[0] for row in db.execute("SELECT id FROM jobs ORDER BY seq")]


async def test_a_dapo_batch_in_flight_resumes_under_its_id_and_judges_each_prompt_once(
    tmp_path: Path,
) -> None:
    path = tmp_path / "journal.sqlite3"
    request = BatchRequest(
        groups=3,
        source=SourceSpec(rows=[{"p": k} for k in range(3)]),
        config=DapoConfig(task="s", group_size=2, max_prompts_in_flight=2),
    )
    first = scripted_stack(path, ScriptedHandler(run_s=30))
    await first.start()
    batches = BatchManager(first.service)
    run = await batches.start(request)
    await until(lambda: first.pipeline.status().stages["run"].in_flight == 4)  # 2 prompts x 2 samples
    assert first.service.journal is not None
    await first.service.journal.flush()
    await crash(first)
    await batches.aclose()

    second = scripted_stack(path, ScriptedHandler(run_s=0))
    await second.start()
    again = BatchManager(second.service)
    try:
        assert await again.resume() == 1
        resumed = again.get(run.id)
        await asyncio.wait_for(resumed.done.wait(), 20)
        info = resumed.info()
        assert info.resumed and info.session_id == run.session.id and info.status == "exhausted"
        # The two prompts in flight kept their jobs (run again); the third started fresh.
        assert info.stats.uniform_groups == 3 and info.stats.prompts_started == 1
        first_jobs = [f"{run.session.id}-{p}-s{s}-a0" for p in (1, 2) for s in (0, 1)]
        assert all(second.pipeline.get(i).resumed == 1 for i in first_jobs)
        assert second.pipeline.status().submitted_total == 6  # 4 taken back + 2 of the new prompt
    finally:
        await again.aclose()
        await second.close()
