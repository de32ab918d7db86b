# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The Gym agent's pipeline (`nemo_gym_prorl.integrations.gym.runtime`) with a scripted model and an
in-memory resources server: /run statuses, cookies, token fields, masking, routing."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest
from support.gym_fakes import ANSWER, CALL, TOOL, FakeResources, ScriptedDialect, scripted_runtime

from nemo_gym_prorl.integrations.gym.config import (
    ModelAccessConfig,
    ProRLAgentSettings,
    resolve_model_access,
)
from nemo_gym_prorl.integrations.gym.contract import assert_conforms, check_group, check_result
from nemo_gym_prorl.integrations.gym.runtime import ProRLGymRuntime
from nemo_gym_prorl.llm.errors import RetriesExhaustedError
from nemo_gym_prorl.pipeline import PipelineConfig


def row(data_source: str = "prorl_math", **extra: object) -> dict[str, object]:
    return {
        "responses_create_params": {"input": [{"role": "user", "content": "What is 1+1?"}], "tools": [TOOL],
                                    "temperature": 1.0, "top_p": 1.0, "max_output_tokens": 64},
        "agent_ref": {"type": "responses_api_agents", "name": "prorl_agent"},
        "data_source": data_source, "task_id": "t1", "expected_answer": "2", **extra,
    }  # fmt: skip


def dead() -> RetriesExhaustedError:
    return RetriesExhaustedError("all 3 attempts failed: connection refused", errors=[])


@pytest.fixture
async def make_runtime() -> AsyncIterator:
    runtimes: list[ProRLGymRuntime] = []

    async def make(replies: list, resources: FakeResources) -> ProRLGymRuntime:
        settings = ProRLAgentSettings(pipeline=PipelineConfig(init_workers=4, run_workers=4, eval_workers=4))
        servers = {"prorl_math": "prorl_math", "prorl_code": "prorl_code"}
        runtime = scripted_runtime(settings, ScriptedDialect(replies), lambda: resources, servers)
        runtimes.append(runtime)
        return runtime

    yield make
    for runtime in runtimes:
        await runtime.close()


async def test_run_returns_a_conforming_verify_response(make_runtime) -> None:
    resources = FakeResources(reward=1.0)
    runtime = await make_runtime([CALL, ANSWER], resources)
    outcome = await runtime.run(row())
    assert outcome.status == 200, outcome.body
    body = outcome.body
    assert_conforms(body)
    assert body["reward"] == 1.0 and body["reward_components"] == {"correct": 1.0}
    assert body["instance_config"]["mask_sample"] is False
    types = [item["type"] for item in body["response"]["output"]]
    assert types == ["function_call", "function_call_output", "message"]
    call = body["response"]["output"][0]
    assert call["name"] == "ipython" and json.loads(call["arguments"]) == {"code": "1+1"}
    assert len(call["generation_token_ids"]) == len(CALL)
    # the seed cookie travels to the tool route and to /verify
    paths = [(path, cookies.get("sid")) for _, path, _, cookies in resources.calls]
    assert paths == [("/seed_session", None), ("/ipython", "s1"), ("/verify", "s1")]
    assert not resources.open_sessions
    for key in ("init_time_s", "run_time_s", "eval_time_s", "total_time_s", "num_turns", "generated_tokens"):
        assert isinstance(body[key], int | float)
    assert body["num_turns"] == 2 and body["num_tool_calls"] == 1
    assert body["prorl"]["stop_reason"] == "answered"


async def test_group_of_samples_shares_the_first_prompt(make_runtime) -> None:
    runtime = await make_runtime([ANSWER], FakeResources())
    results = [(await runtime.run(row())).body for _ in range(3)]
    assert check_group(results) == []


async def test_unknown_data_source_is_a_data_failure(make_runtime) -> None:
    runtime = await make_runtime([ANSWER], FakeResources())
    outcome = await runtime.run(row("prorl_nope"))
    assert outcome.status == 400 and outcome.body["error"] == "unknown_task"


async def test_resources_server_down_at_seed_is_infrastructure(make_runtime) -> None:
    runtime = await make_runtime([ANSWER], FakeResources(fail={"/seed_session": "down"}))
    assert (await runtime.run(row())).status == 503
    runtime2 = await make_runtime([ANSWER], FakeResources(fail={"/seed_session": 500}))
    assert (await runtime2.run(row())).status == 503
    runtime3 = await make_runtime([ANSWER], FakeResources(fail={"/seed_session": 422}))
    assert (await runtime3.run(row())).status == 400


async def test_dead_backends_before_the_first_turn_are_retryable(make_runtime) -> None:
    resources = FakeResources()
    runtime = await make_runtime([dead()], resources)
    outcome = await runtime.run(row())
    assert outcome.status == 503, outcome.body
    assert [c[1] for c in resources.calls] == ["/seed_session", "/close_session"]
    assert not resources.open_sessions


async def test_backends_dying_mid_trajectory_mask_the_sample(make_runtime) -> None:
    runtime = await make_runtime([CALL, dead()], FakeResources(reward=0.0))
    outcome = await runtime.run(row())
    assert outcome.status == 200
    body = outcome.body
    assert body["mask_sample"] is True and body["instance_config"]["mask_sample"] is True
    assert body["failure_kind"] == "provider_unavailable"
    assert check_result(body) == []


async def test_verifier_failure_masks_the_sample(make_runtime) -> None:
    runtime = await make_runtime([ANSWER], FakeResources(fail={"/verify": 500}))
    body = (await runtime.run(row())).body
    assert body["mask_sample"] is True and body["failure_kind"] == "verifier_error"
    assert body["reward"] == 0.0 and check_result(body) == []


async def test_unknown_tool_is_answered_without_a_request(make_runtime) -> None:
    resources = FakeResources()
    bad = '<tool_call>\n{"name": "rm_rf", "arguments": {}}\n</tool_call>'
    runtime = await make_runtime([bad, ANSWER], resources)
    body = (await runtime.run(row())).body
    outputs = [i for i in body["response"]["output"] if i["type"] == "function_call_output"]
    assert outputs[0]["output"] == "Unknown tool `rm_rf`. Available tools: ipython."  # dispatch.py's wording
    assert "/rm_rf" not in [c[1] for c in resources.calls]


async def test_rollout_api_runs_gym_rows_too(make_runtime) -> None:
    from nemo_gym_prorl.pipeline import JobSpec

    runtime = await make_runtime([ANSWER], FakeResources())
    await runtime.start()
    result = await runtime.service.process(JobSpec(instance=row()), 30)
    assert result.state == "done" and result.reward == 1.0
    assistant = [m for m in result.trajectory.messages if m.get("role") == "assistant"]
    assert assistant and assistant[0]["token_ids"] and assistant[0]["logprobs"]


def test_model_access_resolution() -> None:
    nemo_rl = {
        "policy_base_url": ["http://a:1/v1", "http://b:2/v1"],
        "policy_model_name": "pol",
        "policy_api_key": "k",
    }
    resolved = resolve_model_access(ModelAccessConfig(), nemo_rl, "policy_model")
    access = resolved.settings
    assert resolved.source == "policy_base_url" and access.dialect == "nemo_rl"
    assert (
        access.backends == ["http://a:1/v1", "http://b:2/v1"]
        and access.model == "pol"
        and access.api_key == "k"
    )
    urls = resolve_model_access(ModelAccessConfig(backends=["http://v:8000"]), nemo_rl, "policy_model")
    assert urls.source == "backends" and urls.settings.dialect == "vllm"
    # A dialect given is kept, even the one the other source would have picked by default.
    given = ModelAccessConfig.model_validate({"dialect": "vllm"})
    assert resolve_model_access(given, nemo_rl, "policy_model").settings.dialect == "vllm"
    given = ModelAccessConfig.model_validate({"backends": ["http://v:8000"], "dialect": "nemo_rl"})
    assert resolve_model_access(given, nemo_rl, "policy_model").settings.dialect == "nemo_rl"
    gym = {"policy_model": {"responses_api_models": {"vllm_model": {"host": "h", "port": 5, "model": "x"}}}}
    via = resolve_model_access(ModelAccessConfig(), gym, "policy_model")
    assert (
        via.source == "model_server"
        and via.settings.backends == ["http://h:5"]
        and via.settings.model == "x"
        and via.settings.health_path is None
    )
    with pytest.raises(ValueError):
        resolve_model_access(ModelAccessConfig(source="policy_base_url"), gym, "policy_model")


def block(command: str) -> str:
    return f"THOUGHT: go.\n\n```mswea_bash_command\n{command}\n```"


async def test_a_harness_drives_run_with_its_commands_on_the_resources_server() -> None:
    """`/run` with mini-swe-agent as the agent: its commands go to the resources server's
    `/exec` in the rollout's session, its model calls to the recording endpoint, and the result
    is the same Gym response (token fields on every model call) the built-in loop gives."""
    settings = ProRLAgentSettings(
        pipeline=PipelineConfig(init_workers=2, run_workers=2, eval_workers=2),
        harness={"name": "mini_swe_agent"},
    )
    resources = FakeResources(reward=1.0)
    replies = [block("ls"), block("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT")]
    runtime = scripted_runtime(settings, ScriptedDialect(replies), lambda: resources)
    try:
        outcome = await runtime.run(row())
    finally:
        await runtime.close()
    assert outcome.status == 200, outcome.body
    body = outcome.body
    assert_conforms(body)
    assert body["reward"] == 1.0 and body["prorl"]["stop_reason"] == "submitted"
    paths = [(path, cookies.get("sid")) for _, path, _, cookies in resources.calls]
    assert paths == [("/seed_session", None), ("/exec", "s1"), ("/exec", "s1"), ("/verify", "s1")]
    messages = [item for item in body["response"]["output"] if item["type"] == "message"]
    assert len(messages) == 2 and all(m["generation_token_ids"] for m in messages)
