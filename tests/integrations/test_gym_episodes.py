# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Gym 0.7 episodes on the agent's pipeline (`ProRLGymRuntime.run_episode`), with a scripted model
and an in-memory resources server: every outcome is Gym's result or a typed failure (kind,
terminal, stage from the table in `integrations/gym/episodes.py`), an attempt retried by
collection never runs the rollout twice, and a cancelled or late episode releases its session."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from nemo_gym.episode_types import EpisodeId
from nemo_gym.failure_kinds import is_namespaced, is_registered
from support.gym_fakes import (
    ANSWER,
    CALL,
    TOOL,
    FakeResources,
    ScriptedDialect,
    scripted_runtime,
    session_opened,
)

from nemo_gym_prorl.integrations.gym.config import ProRLAgentSettings
from nemo_gym_prorl.integrations.gym.episodes import (
    _REFUSALS,
    EpisodeLedger,
    EpisodeOutcome,
    failure_for_error,
    task_digest,
)
from nemo_gym_prorl.integrations.gym.runtime import ProRLGymRuntime
from nemo_gym_prorl.llm.errors import RetriesExhaustedError
from nemo_gym_prorl.pipeline import PipelineConfig


def row(**extra: object) -> dict[str, Any]:
    return {
        "responses_create_params": {"input": [{"role": "user", "content": "What is 1+1?"}], "tools": [TOOL],
                                    "max_output_tokens": 64},
        "data_source": "prorl_math", "task_id": "t1", "expected_answer": "2", **extra,
    }  # fmt: skip


MakeRuntime = Callable[..., Awaitable[tuple[ProRLGymRuntime, ScriptedDialect]]]


@pytest.fixture
async def make_runtime() -> AsyncIterator[MakeRuntime]:
    runtimes: list[ProRLGymRuntime] = []

    async def make(
        replies: list[str | Exception], resources: FakeResources, dialect: ScriptedDialect | None = None
    ) -> tuple[ProRLGymRuntime, ScriptedDialect]:
        settings = ProRLAgentSettings(pipeline=PipelineConfig(init_workers=2, run_workers=2, eval_workers=2))
        dialect = dialect or ScriptedDialect(replies)
        runtime = scripted_runtime(settings, dialect, lambda: resources)
        runtimes.append(runtime)
        return runtime, dialect

    yield make
    for runtime in runtimes:
        await runtime.close()


def typed(outcome: EpisodeOutcome) -> tuple[str | None, bool, str | None]:
    """A failed outcome's (failure_kind, terminal, stage)."""
    assert outcome.failure is not None, outcome.result
    return outcome.failure.failure_kind, outcome.failure.terminal, outcome.failure.stage


def seeds(resources: FakeResources) -> int:
    return sum(1 for _, path, _, _ in resources.calls if path == "/seed_session")


async def test_a_scored_rollout_is_a_result_without_the_keys_collection_writes_itself(make_runtime) -> None:
    resources = FakeResources(reward=1.0)
    runtime, _ = await make_runtime([CALL, ANSWER], resources)
    outcome = await runtime.run_episode(EpisodeId(rollout_id="r1"), row(), wall_time_s=60)
    assert outcome.failure is None and outcome.result is not None
    assert outcome.result["reward"] == 1.0
    assert not [k for k in outcome.result if k.startswith("_ng_") or k in ("ng_trajectory", "ng_perf")]
    assert outcome.result["response"]["output"][0]["generation_token_ids"]
    assert not resources.open_sessions


async def test_a_retried_attempt_after_a_result_gets_the_same_result_without_a_second_rollout(
    make_runtime,
) -> None:
    resources = FakeResources(reward=1.0)
    runtime, dialect = await make_runtime([CALL, ANSWER], resources)
    first = await runtime.run_episode(EpisodeId(rollout_id="r1"), row())
    calls = dialect.calls
    again = await runtime.run_episode(EpisodeId(rollout_id="r1", attempt=1), row())
    assert again.result == first.result and again.job_id == first.job_id
    assert dialect.calls == calls and seeds(resources) == 1  # no model call, no sandbox again


async def test_attempt_zero_of_a_settled_rollout_id_is_a_new_collections_rollout(make_runtime) -> None:
    # Gym numbers rollouts `<task>-<rollout>` afresh in every collection run: the same id with
    # attempt 0 is a new sample, and the same id for another task is another rollout altogether.
    resources = FakeResources(reward=1.0)
    runtime, _ = await make_runtime([CALL, ANSWER], resources)
    first = await runtime.run_episode(EpisodeId(rollout_id="0-0"), row())
    again = await runtime.run_episode(EpisodeId(rollout_id="0-0"), row())
    other_task = await runtime.run_episode(EpisodeId(rollout_id="0-0", attempt=1), row(task_id="t2"))
    assert len({first.job_id, again.job_id, other_task.job_id}) == 3 and seeds(resources) == 3


async def test_attempts_that_arrive_together_share_one_rollout(make_runtime) -> None:
    resources = FakeResources(reward=1.0)
    runtime, _ = await make_runtime([CALL, ANSWER], resources)
    outcomes = await asyncio.gather(
        runtime.run_episode(EpisodeId(rollout_id="r1"), row()),
        runtime.run_episode(EpisodeId(rollout_id="r1", attempt=1), row()),
    )
    assert outcomes[0].job_id == outcomes[1].job_id and seeds(resources) == 1
    other = await runtime.run_episode(EpisodeId(rollout_id="r2"), row())
    assert other.job_id != outcomes[0].job_id and seeds(resources) == 2


async def test_an_outage_at_seed_is_a_retryable_failure_and_the_next_attempt_runs_again(make_runtime) -> None:
    resources = FakeResources(reward=1.0, fail={"/seed_session": "down"})
    runtime, dialect = await make_runtime([CALL, ANSWER], resources)
    outcome = await runtime.run_episode(EpisodeId(rollout_id="r1"), row())
    assert typed(outcome) == ("transport_unreachable", False, "seed")
    assert dialect.calls == 0
    resources.fail.clear()
    retried = await runtime.run_episode(EpisodeId(rollout_id="r1", attempt=1), row())
    assert retried.result is not None and retried.result["reward"] == 1.0


async def test_a_row_no_stage_could_run_is_a_terminal_failure_at_seed_before_any_work(make_runtime) -> None:
    resources = FakeResources()
    runtime, dialect = await make_runtime([ANSWER], resources)
    bad = row()
    del bad["responses_create_params"]
    outcome = await runtime.run_episode(EpisodeId(rollout_id="r1"), bad)
    assert typed(outcome) == ("prorl:invalid_instance", True, "seed")
    assert "instance.responses_create_params" in outcome.failure.failure_reason
    assert dialect.calls == 0 and not resources.calls
    # settled: a retry is answered the same, not run
    again = await runtime.run_episode(EpisodeId(rollout_id="r1", attempt=1), bad)
    assert again.failure == outcome.failure


async def test_inference_dying_mid_rollout_is_a_retryable_failure_not_a_scored_result(make_runtime) -> None:
    resources = FakeResources(reward=1.0)
    dead = RetriesExhaustedError("all 3 attempts failed: connection refused", errors=[])
    runtime, _ = await make_runtime([CALL, dead], resources)
    outcome = await runtime.run_episode(EpisodeId(rollout_id="r1"), row())
    assert typed(outcome) == ("transport_peer_drop", False, "agent")
    assert not resources.open_sessions


class SlowDialect(ScriptedDialect):
    async def generate(self, ctx):  # type: ignore[no-untyped-def]
        await asyncio.sleep(30)
        return await super().generate(ctx)


async def test_a_rollout_past_its_wall_deadline_is_an_agent_timeout_and_releases_its_session(
    make_runtime,
) -> None:
    resources = FakeResources(reward=1.0)
    runtime, _ = await make_runtime([], resources, SlowDialect([ANSWER]))
    outcome = await asyncio.wait_for(
        runtime.run_episode(EpisodeId(rollout_id="r1"), row(), wall_time_s=0.5), 20
    )
    assert typed(outcome) == ("agent_timeout", False, "agent")
    assert seeds(resources) == 1 and not resources.open_sessions


async def test_cancelling_an_episode_stops_its_rollout_and_releases_its_session(make_runtime) -> None:
    resources = FakeResources(reward=1.0)
    runtime, _ = await make_runtime([], resources, SlowDialect([ANSWER]))
    episode = EpisodeId(rollout_id="r1")
    running = asyncio.create_task(runtime.run_episode(episode, row()))
    await session_opened(resources)
    assert await runtime.cancel_episode(episode, task_digest(row()), "the episode's deadline passed") is True
    outcome = await asyncio.wait_for(running, 20)
    assert outcome.failure is not None and outcome.failure.failure_kind == "cancelled"
    assert outcome.failure.terminal is False
    assert not resources.open_sessions
    assert await runtime.cancel_episode(episode, task_digest(row()), "again") is False  # nothing left to stop


class GatedDialect(ScriptedDialect):
    """Every turn waits for `gate`: rollouts stay in flight, side by side, until the test opens it."""

    def __init__(self, replies: list[str | Exception]) -> None:
        super().__init__(replies)
        self.gate = asyncio.Event()

    async def generate(self, ctx):  # type: ignore[no-untyped-def]
        await self.gate.wait()
        return await super().generate(ctx)


async def sessions_open(resources: FakeResources, count: int, timeout_s: float = 20.0) -> None:
    async with asyncio.timeout(timeout_s):
        while len(resources.open_sessions) < count:  # noqa: ASYNC110 (the fake has no event to wait on)
            await asyncio.sleep(0.01)


async def test_a_cancel_reaches_only_its_own_episode_beside_neighbours_that_share_its_id_or_task(
    make_runtime,
) -> None:
    # Gym's rollout ids repeat across tasks and collection runs: an episode is its id and its task.
    resources = FakeResources(reward=1.0)
    dialect = GatedDialect([ANSWER])
    runtime, _ = await make_runtime([], resources, dialect)
    zero = EpisodeId(rollout_id="0-0")
    cancelled_one = asyncio.create_task(runtime.run_episode(zero, row(task_id="t1")))
    same_id_other_task = asyncio.create_task(runtime.run_episode(zero, row(task_id="t2")))
    same_task_other_id = asyncio.create_task(
        runtime.run_episode(EpisodeId(rollout_id="0-1"), row(task_id="t1"))
    )
    await sessions_open(resources, 3)

    assert await runtime.cancel_episode(zero, task_digest(row(task_id="t1")), "its episode ended") is True
    stopped = await asyncio.wait_for(cancelled_one, 20)
    assert stopped.failure is not None and stopped.failure.failure_kind == "cancelled"

    dialect.gate.set()
    neighbours = await asyncio.wait_for(asyncio.gather(same_id_other_task, same_task_other_id), 20)
    assert [n.result["reward"] if n.result else n.failure for n in neighbours] == [1.0, 1.0]
    assert not resources.open_sessions
    # settled: a late cancel (the environment server's cleanup after a result) stops nothing
    assert await runtime.cancel_episode(zero, task_digest(row(task_id="t2")), "late") is False


async def test_an_attempts_cancel_leaves_the_rollout_another_attempt_of_it_waits_on(make_runtime) -> None:
    resources = FakeResources(reward=1.0)
    dialect = GatedDialect([ANSWER])
    runtime, _ = await make_runtime([], resources, dialect)
    first, retry, digest = (
        EpisodeId(rollout_id="r1"),
        EpisodeId(rollout_id="r1", attempt=1),
        task_digest(row()),
    )
    running = asyncio.create_task(runtime.run_episode(first, row()))
    await sessions_open(resources, 1)
    joined = asyncio.create_task(runtime.run_episode(retry, row()))
    async with asyncio.timeout(20):
        while not runtime.episodes.shared_with_another_attempt(first, digest):  # noqa: ASYNC110
            await asyncio.sleep(0.01)

    assert await runtime.cancel_episode(first, digest, "the first attempt's caller went away") is False
    dialect.gate.set()
    outcomes = await asyncio.wait_for(asyncio.gather(running, joined), 20)
    assert [o.result["reward"] if o.result else o.failure for o in outcomes] == [1.0, 1.0]
    assert outcomes[0].job_id == outcomes[1].job_id and seeds(resources) == 1


def test_every_kind_in_the_table_is_gyms_own_or_namespaced() -> None:
    kinds = {kind for kind, _, _ in _REFUSALS.values()}
    kinds |= {"transport_unreachable", "transport_peer_drop", "agent_timeout", "verifier_error", "cancelled"}
    kinds |= {"prorl:stage_error", "prorl:no_generation"}
    for kind in kinds:
        assert is_registered(kind) or is_namespaced(kind), kind
    assert not is_registered("timeout") and not is_namespaced("no_generation")  # what it replaced


def test_a_refusal_the_table_does_not_know_is_the_stacks_fault_not_the_rows() -> None:
    failure = failure_for_error(500, "surprise", "boom")
    assert failure.failure_kind == "prorl:stage_error" and failure.stage == "admission"


async def test_the_ledger_forgets_the_oldest_settled_rollouts_past_its_capacity() -> None:
    ledger = EpisodeLedger(capacity=2)
    runs = 0

    async def start() -> EpisodeOutcome:
        nonlocal runs
        runs += 1
        return EpisodeOutcome(result={"reward": 1.0})

    for rollout in ("a", "b", "c"):
        await ledger.run(EpisodeId(rollout_id=rollout), "task", start)
    assert ledger.outcome("a", "task") is None and ledger.outcome("c", "task") is not None
    await ledger.run(EpisodeId(rollout_id="c", attempt=1), "task", start)
    assert runs == 3
