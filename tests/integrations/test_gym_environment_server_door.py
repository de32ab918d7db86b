# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The environment server's `/run` is a door like every other: each row no stage could run (the
same rows as `prorl serve`'s door test), sent by Gym's collection as a flat row or as an episode
request, is refused with its field named, by the real resources server of its domain, before any
model call or sandbox: as a terminal failure at stage `seed`, in Gym's flat-row failure fields or
its typed `EpisodeFailure`, which collection records once and never dispatches again (the
project's own doors answer the same rows a 400 `invalid_instance`)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from support.domain_servers import GYM_NAMES, DomainServers
from support.environment_stack import EnvironmentStack
from support.scripted_model import ScriptedDialect
from support.unrunnable_rows import UNRUNNABLE


@pytest.fixture
async def stack(domains: DomainServers) -> AsyncIterator[EnvironmentStack]:
    # A model call would fail the test: the scripted model has no reply to give.
    environment = EnvironmentStack(ScriptedDialect([]), lambda: domains, GYM_NAMES)
    yield environment
    await environment.close()


@pytest.mark.parametrize("case", list(UNRUNNABLE))
async def test_a_flat_row_no_stage_could_run_is_a_terminal_failure_naming_its_field(
    stack: EnvironmentStack, domains: DomainServers, case: str
) -> None:
    instance, field = UNRUNNABLE[case]
    flat = {**instance, "_ng_task_index": 0, "_ng_rollout_index": 0}
    reply = await stack.http.post("/run", json=flat)
    assert reply.status_code == 200, reply.text
    answer = reply.json()
    assert (answer["_ng_failure_class"], answer["_ng_failure_terminal"], answer["_ng_failure_stage"]) == (
        "environment_server_failed",
        True,
        "seed",
    )
    assert answer["failure_kind"] == "prorl:invalid_instance"
    assert f"instance.{field}:" in answer["_ng_failure_message"], answer
    assert stack.dialect.calls == 0 and domains.open_sessions() == 0 and not domains.sandboxes_made()


@pytest.mark.parametrize("case", list(UNRUNNABLE))
async def test_an_episode_request_no_stage_could_run_is_a_terminal_failure_at_seed(
    stack: EnvironmentStack, domains: DomainServers, case: str
) -> None:
    instance, field = UNRUNNABLE[case]
    request = {
        "episode_id": {"rollout_id": "0-0", "attempt": 0},
        "task": {"task_id": {"taskset": "prorl", "task_id": "0"}, "task_input": instance},
    }
    reply = await stack.http.post("/run", json=request)
    assert reply.status_code == 200, reply.text
    failure = reply.json()["failure"]
    assert (failure["failure_kind"], failure["terminal"], failure["stage"]) == (
        "prorl:invalid_instance",
        True,
        "seed",
    )
    assert f"instance.{field}:" in failure["failure_reason"], failure
    assert stack.dialect.calls == 0 and domains.open_sessions() == 0 and not domains.sandboxes_made()
