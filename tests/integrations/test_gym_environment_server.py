# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""prorl_pipeline's HTTP face in front of the real ProRL agent app (its runtime with a scripted
model and an in-memory resources server; Gym's server client replaced by an in-process one):
episode requests answer Gym's typed response, flat rows Gym's legacy shape (a row no stage could
run: a terminal failure, not an HTTP error), Gym's limits hold, every way an episode can end
releases its rollout, and an episode's cleanup reaches its own rollout only."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from support.environment_stack import EnvironmentStack
from support.gym_fakes import ANSWER, CALL, TOOL, FakeResources, ScriptedDialect, session_opened


def task_input(**extra: object) -> dict[str, Any]:
    return {
        "responses_create_params": {"input": [{"role": "user", "content": "What is 1+1?"}], "tools": [TOOL],
                                    "max_output_tokens": 64},
        "data_source": "prorl_math", "expected_answer": "2", **extra,
    }  # fmt: skip


def flat_row(task_index: int = 0, attempt: int | None = None, **extra: object) -> dict[str, Any]:
    row = {**task_input(**extra), "agent_ref": {"type": "responses_api_agents", "name": "prorl_agent"},
           "_ng_task_index": task_index, "_ng_rollout_index": 0}  # fmt: skip
    if attempt is not None:
        row["_ng_attempt_index"] = attempt
    return row


def episode(rollout_id: str = "t0-r0", attempt: int = 0, **extra: object) -> dict[str, Any]:
    return {
        "episode_id": {"rollout_id": rollout_id, "attempt": attempt},
        "task": {
            "task_id": {"taskset": "prorl_math:example", "task_id": "0"},
            "task_input": task_input(**extra),
        },
    }


class Stack(EnvironmentStack):
    """The environment server and the agent over the in-memory resources server."""

    def __init__(self, dialect: ScriptedDialect, **limits: Any) -> None:
        self.resources = FakeResources(reward=1.0)
        super().__init__(dialect, lambda: self.resources, {"prorl_math": "prorl_math"}, **limits)

    def seeds(self) -> int:
        return sum(1 for _, path, _, _ in self.resources.calls if path == "/seed_session")


class SlowDialect(ScriptedDialect):
    async def generate(self, ctx):  # type: ignore[no-untyped-def]
        await asyncio.sleep(30)
        return await super().generate(ctx)


MakeStack = Callable[..., Stack]


@pytest.fixture
async def make_stack() -> AsyncIterator[MakeStack]:
    stacks: list[Stack] = []

    def make(dialect: ScriptedDialect | None = None, **limits: Any) -> Stack:
        stacks.append(Stack(dialect or ScriptedDialect([CALL, ANSWER]), **limits))
        return stacks[-1]

    yield make
    for stack in stacks:
        await stack.close()


async def test_an_episode_request_answers_gyms_typed_result(make_stack: MakeStack) -> None:
    stack = make_stack()
    reply = await stack.http.post("/run", json=episode())
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["episode_id"] == {"rollout_id": "t0-r0", "attempt": 0}
    assert body["task_id"] == {"taskset": "prorl_math:example", "task_id": "0"}
    assert "failure" not in body and body["result"]["reward"] == 1.0
    assert body["result"]["response"]["output"][-1]["generation_token_ids"]
    assert not stack.resources.open_sessions


async def test_a_flat_row_answers_its_result_and_a_retried_attempt_runs_nothing_again(
    make_stack: MakeStack,
) -> None:
    stack = make_stack()
    first = (await stack.http.post("/run", json=flat_row())).json()
    assert first["reward"] == 1.0 and first["agent_ref"] == {"name": "prorl_agent"}
    calls = stack.dialect.calls
    again = (await stack.http.post("/run", json=flat_row(attempt=1))).json()
    assert again["prorl"]["job_id"] == first["prorl"]["job_id"]
    assert stack.dialect.calls == calls and stack.seeds() == 1


async def test_a_row_no_stage_could_run_is_a_terminal_failure_before_any_work(make_stack: MakeStack) -> None:
    stack = make_stack()
    flat = flat_row()
    del flat["responses_create_params"]
    reply = await stack.http.post("/run", json=flat)
    # Gym's collection records it once and goes on (an HTTP error would end its run)
    assert reply.status_code == 200, reply.text
    answer = reply.json()
    assert (answer["_ng_failure_class"], answer["_ng_failure_terminal"], answer["_ng_failure_stage"]) == (
        "environment_server_failed",
        True,
        "seed",
    )
    assert "instance.responses_create_params" in answer["_ng_failure_message"]
    assert answer["failure_kind"] == "prorl:invalid_instance"
    assert answer["agent_ref"] == {"name": "prorl_agent"}
    typed = (await stack.http.post("/run", json=episode(responses_create_params=None))).json()
    failure = typed["failure"]
    assert (failure["failure_kind"], failure["terminal"], failure["stage"]) == (
        "prorl:invalid_instance",
        True,
        "seed",
    )
    assert stack.dialect.calls == 0 and stack.seeds() == 0


def refusal(reply: Any) -> str:
    """The reasons of a 422, as FastAPI (and Gym's handler over it) answers one."""
    assert reply.status_code == 422, reply.text
    return " ".join(f"{error['loc']}: {error['msg']}" for error in reply.json()["detail"])


async def test_a_malformed_envelope_is_a_422_naming_what_is_wrong(make_stack: MakeStack) -> None:
    stack = make_stack()
    reply = await stack.http.post("/run", json={"episode_id": {"rollout_id": ""}, "task": {}})
    assert "rollout_id" in refusal(reply)
    no_identity = task_input()  # neither a task id nor Gym's task index
    assert "task_index" in refusal(await stack.http.post("/run", json=no_identity))
    assert "_ng_attempt_index" in refusal(
        await stack.http.post("/run", json={**flat_row(), "_ng_attempt_index": -1})
    )
    assert stack.dialect.calls == 0 and stack.seeds() == 0


async def test_a_flat_row_is_checked_for_the_agent_it_names(make_stack: MakeStack) -> None:
    stack = make_stack()
    elsewhere = {**flat_row(), "agent_ref": {"type": "responses_api_agents", "name": "another_agent"}}
    assert "another_agent" in refusal(await stack.http.post("/run", json=elsewhere))
    foreign = {**flat_row(), "task_source": "someone_elses_resources"}
    assert "someone_elses_resources" in refusal(await stack.http.post("/run", json=foreign))
    assert stack.dialect.calls == 0 and stack.seeds() == 0
    # the agent, this server, or a resources server the agent serves may have declared the dataset
    for source in ("prorl_agent", "prorl_agent_environment_server", "prorl_math"):
        answer = (await stack.http.post("/run", json={**flat_row(), "task_source": source})).json()
        assert answer["reward"] == 1.0, answer


async def test_the_episode_deadline_ends_the_rollout_in_the_pipeline_first(make_stack: MakeStack) -> None:
    stack = make_stack(SlowDialect([ANSWER]), default_episode_timeout_seconds=3, deadline_margin_seconds=2)
    body = (await stack.http.post("/run", json=episode())).json()
    failure = body["failure"]
    # the pipeline's own timeout (its wall deadline of 1 s), not Gym's untyped "Episode timed out"
    assert (failure["failure_kind"], failure["terminal"], failure["stage"]) == (
        "agent_timeout",
        False,
        "agent",
    )
    assert not stack.resources.open_sessions


async def test_admission_is_gyms_limit_and_a_full_server_is_a_retryable_admission_failure(
    make_stack: MakeStack,
) -> None:
    stack = make_stack(SlowDialect([ANSWER]), max_concurrent_episodes=1, queue_timeout_seconds=0.3,
                       default_episode_timeout_seconds=20, deadline_margin_seconds=1)  # fmt: skip
    running = asyncio.create_task(stack.http.post("/run", json=episode("busy")))
    await session_opened(stack.resources)
    queued = (await stack.http.post("/run", json=episode("waits"))).json()
    assert queued["failure"]["stage"] == "admission" and queued["failure"]["terminal"] is False
    assert stack.seeds() == 1  # the refused episode opened nothing
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running


async def test_a_cancelled_episode_cancels_its_rollout_through_the_registered_cleanup(
    make_stack: MakeStack,
) -> None:
    from environment_servers.prorl_pipeline.app import ProRLEpisodeRequest

    stack = make_stack(SlowDialect([ANSWER]), default_episode_timeout_seconds=60)
    run = asyncio.create_task(stack.server.run_request(ProRLEpisodeRequest.model_validate(episode())))
    await session_opened(stack.resources)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert "/v1/episodes/cancel" in stack.client.paths
    assert not stack.resources.open_sessions  # the pipeline released it before the cancel answered


class GatedDialect(ScriptedDialect):
    """Every turn waits for `gate`: episodes stay in flight, side by side, until the test opens it."""

    def __init__(self, replies: list[str | Exception]) -> None:
        super().__init__(replies)
        self.gate = asyncio.Event()

    async def generate(self, ctx):  # type: ignore[no-untyped-def]
        await self.gate.wait()
        return await super().generate(ctx)


async def sessions_open(resources: FakeResources, count: int) -> None:
    async with asyncio.timeout(20):
        while len(resources.open_sessions) < count:  # noqa: ASYNC110 (the fake has no event to wait on)
            await asyncio.sleep(0.01)


async def test_an_episodes_cleanup_cancels_its_own_rollout_and_no_neighbours(make_stack: MakeStack) -> None:
    from environment_servers.prorl_pipeline.app import ProRLEpisodeRequest

    dialect = GatedDialect([ANSWER])
    stack = make_stack(dialect, default_episode_timeout_seconds=60)

    def start(rollout_id: str, question: str) -> asyncio.Task[Any]:
        request = ProRLEpisodeRequest.model_validate(episode(rollout_id, question=question))
        return asyncio.create_task(stack.server.run_request(request))

    # Gym's rollout `0-0` of two tasks (one cancelled), and the cancelled one's task as `0-1`
    cancelled, same_id, same_task = start("0-0", "a"), start("0-0", "b"), start("0-1", "a")
    await sessions_open(stack.resources, 3)
    cancelled.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    assert stack.client.paths.count("/v1/episodes/cancel") == 1
    assert len(stack.resources.open_sessions) == 2  # its rollout stopped and released, no other

    dialect.gate.set()
    for response in await asyncio.wait_for(asyncio.gather(same_id, same_task), 20):
        assert response.failure is None and response.result["reward"] == 1.0
    assert not stack.resources.open_sessions


async def test_cleanup_after_an_episode_the_agent_answered_posts_nothing(make_stack: MakeStack) -> None:
    stack = make_stack()
    assert (await stack.http.post("/run", json=episode())).json()["result"]["reward"] == 1.0
    refused = (await stack.http.post("/run", json=episode("t1-r0", responses_create_params=None))).json()
    assert refused["failure"]["terminal"] is True
    assert (await stack.http.post("/run", json=flat_row())).json()["reward"] == 1.0
    assert "/v1/episodes/cancel" not in stack.client.paths


async def test_an_unreachable_agent_is_a_retryable_transport_failure(make_stack: MakeStack) -> None:
    stack = make_stack()
    stack.client.down = True
    failure = (await stack.http.post("/run", json=episode())).json()["failure"]
    assert failure["failure_kind"] == "transport_unreachable" and failure["terminal"] is False
    flat = (await stack.http.post("/run", json=flat_row())).json()
    assert flat["_ng_failure_class"] == "environment_server_failed" and flat["_ng_failure_terminal"] is False
