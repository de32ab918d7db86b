# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""NeMo Gym's observability over the prorl agent's `/run` results: the `ng_agent_observations`
bundle and the captured model calls let Gym's own code build `ng_trajectory`, `ng_perf`, health
verdicts and ATIF files, run here exactly as `ng_collect_rollouts` runs them per rollout."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from nemo_gym.atif_export import AtifExportError, gym_rollout_to_atif
from nemo_gym.base_responses_api_model import merge_model_call_capture_into_record
from nemo_gym.rollout_collection import _attach_ng_perf, _attach_trajectory_record
from nemo_gym.rollout_health import run_health_checks
from nemo_gym.rollout_observability import AgentObservationBundle
from support.gym_fakes import FakeResources, ScriptedDialect
from test_gym_agent import ANSWER, CALL, row

from nemo_gym_prorl.integrations.gym.config import ProRLAgentSettings, ResolvedModelAccess
from nemo_gym_prorl.integrations.gym.observability import capture_dir, invocation_status
from nemo_gym_prorl.integrations.gym.runtime import ProRLGymRuntime
from nemo_gym_prorl.llm.access import LLMConfig
from nemo_gym_prorl.pipeline import PipelineConfig

INDICES = {"_ng_task_index": 3, "_ng_rollout_index": 1}


@pytest.fixture
async def runtime_with_capture(tmp_path: Path) -> AsyncIterator:
    runtimes: list[ProRLGymRuntime] = []

    async def make(replies: list[str], directory: Path | None) -> ProRLGymRuntime:
        settings = ProRLAgentSettings(pipeline=PipelineConfig(init_workers=2, run_workers=2, eval_workers=2))
        access = ResolvedModelAccess(
            LLMConfig(backends=["http://127.0.0.1:9"], dialect="vllm", model="m", health_path=None),
            "backends",
        )
        runtime = ProRLGymRuntime(
            settings, {"prorl_math": "prorl_math"}, lambda: FakeResources(reward=1.0), access,
            model_call_capture_dir=directory,
        )  # fmt: skip
        runtime.llm.dialect = ScriptedDialect(replies)
        runtimes.append(runtime)
        return runtime

    yield make
    for runtime in runtimes:
        await runtime.close()


def collected(body: dict, directory: Path) -> dict:
    """What ng_collect_rollouts does to one `/run` result with observability on."""
    record = dict(body)
    merge_model_call_capture_into_record(record, [directory], include_payloads=True)
    _attach_trajectory_record(record, record)
    _attach_ng_perf(record, observability_enabled=True, rollout_latency_ms=12.0)
    return record


async def test_a_tool_using_rollout_is_fully_observed_by_gym(runtime_with_capture, tmp_path: Path) -> None:
    capture = tmp_path / "capture"
    runtime = await runtime_with_capture([CALL, ANSWER], capture)
    outcome = await runtime.run(row(**INDICES))
    assert outcome.status == 200, outcome.body
    body = outcome.body

    bundle = AgentObservationBundle.model_validate(body["ng_agent_observations"])
    kinds = sorted(record.kind for record in bundle.records)
    assert kinds == ["agent_invocation", "tool_call"]
    assert (capture / "3-1.capture.jsonl").exists()
    assert len((capture / "3-1.capture.jsonl").read_text().splitlines()) == 2  # two model calls

    record = collected(body, capture)
    trajectory = record["ng_trajectory"]
    assert trajectory["gaps"] == []
    assert [turn["turn_no"] for turn in trajectory["turns"]] == [1, 2]
    calls = trajectory["model_calls"]
    assert [c["response_metadata"]["finish_reason"] for c in calls] == ["tool_calls", "stop"]
    assert sum(c["token_stats"]["prompt_tokens"] for c in calls) == body["response"]["usage"]["input_tokens"]
    assert sum(c["token_stats"]["completion_tokens"] for c in calls) == body["generated_tokens"]
    assert trajectory["tool_calls"][0]["tool_name"] == "ipython"
    assert trajectory["tool_calls"][0]["output"]  # joined with the conversation's function_call_output
    assert record["ng_perf"]["num_turns"] == 2 and record["ng_perf"]["num_tool_calls"] == 1
    assert record["ng_perf"]["token_observability_coverage"] == 1.0

    rollouts = tmp_path / "rollouts.jsonl"
    rollouts.write_text(json.dumps(record) + "\n")
    health = run_health_checks(rollouts, output_dir=tmp_path / "health", workers=1)
    (digest,) = health.rollouts
    assert digest.unobserved == [] and digest.verdict == "healthy", digest

    # Gym 0.7's collector numbers a projected turn's `step_count` with the tool calls BEFORE the
    # turn, its ATIF exporter expects them INCLUDED: every projected trajectory with a tool call is
    # refused, whichever agent produced it. Everything else of ours is accepted, as the export of the
    # same record with only that count made cumulative shows.
    with pytest.raises(AtifExportError, match="step_count"):
        gym_rollout_to_atif(record, session_id="s", agent_version="0.1")
    fixed = json.loads(json.dumps(record))
    for turn in fixed["ng_trajectory"]["turns"]:
        turn["step_count"] = 1
    atif = gym_rollout_to_atif(fixed, session_id="s", agent_version="0.1")
    assert [step.source for step in atif.steps] == ["system", "user", "agent", "agent"]


async def test_an_answer_without_tools_exports_to_atif_as_is(runtime_with_capture, tmp_path: Path) -> None:
    capture = tmp_path / "capture"
    runtime = await runtime_with_capture([ANSWER], capture)
    outcome = await runtime.run(row(**INDICES))
    assert outcome.status == 200, outcome.body
    record = collected(outcome.body, capture)
    atif = gym_rollout_to_atif(record, session_id="s", agent_version="0.1")
    assert [step.source for step in atif.steps] == ["system", "user", "agent"]
    assert atif.final_metrics.total_completion_tokens == outcome.body["generated_tokens"]


async def test_without_capture_the_bundle_still_travels_and_nothing_is_written(
    runtime_with_capture, tmp_path: Path
) -> None:
    runtime = await runtime_with_capture([ANSWER], None)
    outcome = await runtime.run(row(**INDICES))
    assert outcome.status == 200
    bundle = AgentObservationBundle.model_validate(outcome.body["ng_agent_observations"])
    (invocation,) = bundle.records
    assert invocation.status == "completed" and len(invocation.model_calls) == 1
    assert not list(tmp_path.iterdir())


def test_capture_dir_follows_gyms_global_config(tmp_path: Path) -> None:
    assert capture_dir({}) is None
    assert capture_dir({"observability_enabled": False, "model_call_capture_dir": str(tmp_path)}) is None
    assert capture_dir({"observability_enabled": True, "model_call_capture_dir": str(tmp_path)}) == tmp_path
    with pytest.raises(ValueError, match="absolute"):
        capture_dir({"observability_enabled": True, "model_call_capture_dir": "relative/dir"})


def test_stop_reasons_map_to_gyms_invocation_statuses() -> None:
    assert invocation_status("answered") == invocation_status("submitted") == "completed"
    assert invocation_status("max_turns") == invocation_status("context_length") == "incomplete"
    assert invocation_status("infrastructure_error") == "failed"
