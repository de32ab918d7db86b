# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Bad input at the door: an instance the task cannot run is refused at submit (400), naming the
field, on every door of the stack, before any sandbox or model is touched."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from support.unrunnable_rows import PROMPT, UNRUNNABLE

from nemo_gym_prorl.service.config import load_config
from nemo_gym_prorl.service.stack import RolloutStack, stack_from_config


@pytest.fixture
async def stack() -> AsyncIterator[RolloutStack]:
    # The default tasks' real handlers; nothing started: validation needs no backend.
    built = stack_from_config(load_config(["llm.health_path=null"]))
    yield built
    await built.close()


@pytest.fixture
async def http(stack: RolloutStack) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=stack.app())
    async with httpx.AsyncClient(transport=transport, base_url="http://stack") as client:
        yield client


def refusal(response: httpx.Response) -> str:
    assert response.status_code == 400, response.text
    assert response.json()["error"] == "invalid_instance"
    return str(response.json()["reason"])


async def test_a_bare_prorl_row_gets_400_naming_responses_create_params(http: httpx.AsyncClient) -> None:
    bare = {"data_source": "gsm8k", "question": "2 + 2?", "answer": "4"}
    reason = refusal(await http.post("/process", json={"instance": bare, "sampling_params": {}}))
    assert "responses_create_params" in reason and "missing" in reason
    native = await http.post("/v1/rollouts", json={"jobs": [{"instance": bare}]})
    assert "responses_create_params" in refusal(native)


async def test_wrong_types_and_unknown_tools_are_named(http: httpx.AsyncClient) -> None:
    cases = {
        "responses_create_params": {"data_source": "gsm8k", "responses_create_params": "2 + 2?"},
        "responses_create_params.input": {"data_source": "gsm8k", "responses_create_params": {"input": []}},
        "responses_create_params.tools": {
            "data_source": "gsm8k",
            "responses_create_params": {**PROMPT, "tools": "bash"},
        },
        "tools_offered": {"data_source": "gsm8k", "responses_create_params": PROMPT, "tools_offered": ["rm"]},
    }
    for field, row in cases.items():
        reason = refusal(await http.post("/v1/rollouts", json={"jobs": [{"instance": row}]}))
        assert f"instance.{field}:" in reason, (field, reason)


async def test_a_batch_is_refused_whole_for_one_bad_inline_row(http: httpx.AsyncClient) -> None:
    good = {"data_source": "gsm8k", "responses_create_params": PROMPT, "expected_answer": "4"}
    rows = [good, {"data_source": "gsm8k"}]
    reason = refusal(await http.post("/v1/batches", json={"groups": 1, "source": {"rows": rows}}))
    assert "source.rows[1]" in reason and "responses_create_params" in reason


@pytest.mark.parametrize("case", list(UNRUNNABLE))
async def test_a_row_no_stage_could_run_is_refused_at_every_door_naming_its_field(
    http: httpx.AsyncClient, case: str
) -> None:
    instance, field = UNRUNNABLE[case]
    answers = {
        "/process": await http.post("/process", json={"instance": instance, "sampling_params": {}}),
        "/v1/rollouts": await http.post("/v1/rollouts", json={"jobs": [{"instance": instance}]}),
        "/v1/batches": await http.post("/v1/batches", json={"groups": 1, "source": {"rows": [instance]}}),
    }
    for door, answer in answers.items():
        assert f"instance.{field}:" in refusal(answer), (door, answer.text)


async def test_a_runnable_instance_passes_the_door_and_meets_admission(http: httpx.AsyncClient) -> None:
    good = {"data_source": "gsm8k", "responses_create_params": PROMPT, "expected_answer": "4"}
    answer = await http.post("/v1/rollouts", json={"jobs": [{"instance": good}]})
    assert answer.status_code == 503  # valid input; this stack is not started (not running)
