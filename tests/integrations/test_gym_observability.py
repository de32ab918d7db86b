# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""NeMo Gym's observability over the prorl agent's `/run` results. With Gym's observability on the
agent sends its own `ng_trajectory` (and records its model calls in Gym's capture store); Gym's own
code then builds `ng_trajectory`, `ng_perf`, health verdicts and ATIF files, run here exactly as
`ng_collect_rollouts` runs them per rollout, whether or not the collector itself captures."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from nemo_gym.atif_export import gym_rollout_to_atif
from nemo_gym.rollout_collection import _attach_ng_perf, _attach_trajectory_record
from nemo_gym.rollout_health import run_health_checks
from nemo_gym.rollout_observability import AgentObservationBundle, TrajectoryRecord
from support.gym_config import parse_global_config
from support.gym_fakes import FakeResources, ScriptedDialect, scripted_runtime
from test_gym_agent import ANSWER, CALL, row

from nemo_gym_prorl.assets import project_root
from nemo_gym_prorl.integrations.gym.config import ProRLAgentSettings, ResolvedModelAccess
from nemo_gym_prorl.integrations.gym.launcher import DOMAINS, StackState, collect_command, compose
from nemo_gym_prorl.integrations.gym.observability import capture_dir, invocation_status, rollout_identity
from nemo_gym_prorl.integrations.gym.runtime import ProRLGymRuntime
from nemo_gym_prorl.llm.access import LLMConfig
from nemo_gym_prorl.pipeline import PipelineConfig

INDICES = {"_ng_task_index": 3, "_ng_rollout_index": 1}


@pytest.fixture
async def runtime_with_capture(tmp_path: Path) -> AsyncIterator:
    runtimes: list[ProRLGymRuntime] = []

    async def make(replies: list[str], directory: Path | None) -> ProRLGymRuntime:
        settings = ProRLAgentSettings(pipeline=PipelineConfig(init_workers=2, run_workers=2, eval_workers=2))
        runtime = scripted_runtime(
            settings,
            ScriptedDialect(replies),
            lambda: FakeResources(reward=1.0),
            model_call_capture_dir=directory,
        )
        runtimes.append(runtime)
        return runtime

    yield make
    for runtime in runtimes:
        await runtime.close()


def collected(body: dict, directory: Path | None) -> dict:
    """What ng_collect_rollouts does to one `/run` result, with its observability on (reading the
    capture `directory`) or off (None)."""
    # Gym's model-server module (anthropic's types with it) is imported by the tests that use it,
    # not by every worker's collection.
    from nemo_gym.base_responses_api_model import merge_model_call_capture_into_record

    record = json.loads(json.dumps(body))
    if directory is not None:
        merge_model_call_capture_into_record(record, [directory], include_payloads=True)
    if {"ng_model_call_capture", "ng_agent_observations", "ng_trajectory"} & record.keys():
        _attach_trajectory_record(record, record)
    _attach_ng_perf(record, observability_enabled=directory is not None, rollout_latency_ms=12.0)
    return record


def health_of(records: list[dict], tmp_path: Path) -> list:
    rollouts = tmp_path / "rollouts.jsonl"
    rollouts.write_text("".join(json.dumps(record) + "\n" for record in records))
    return run_health_checks(rollouts, output_dir=tmp_path / "health", workers=1).rollouts


async def test_a_tool_using_rollout_is_fully_observed_by_gym(runtime_with_capture, tmp_path: Path) -> None:
    capture = tmp_path / "capture"
    runtime = await runtime_with_capture([CALL, ANSWER], capture)
    outcome = await runtime.run(row(**INDICES))
    assert outcome.status == 200, outcome.body
    body = outcome.body

    sent = TrajectoryRecord.model_validate(body["ng_trajectory"])
    assert [call.token_stats.completion_tokens for call in sent.model_calls] == [
        len(item["generation_token_ids"])
        for item in body["response"]["output"]
        if item.get("generation_token_ids")
    ]
    assert [turn.step_count for turn in sent.turns] == [1, 1]  # cumulative, this turn's call included
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
    assert trajectory["tool_calls"][0]["output"]  # the output the model read
    assert record["ng_perf"]["num_turns"] == 2 and record["ng_perf"]["num_tool_calls"] == 1
    assert record["ng_perf"]["token_observability_coverage"] == 1.0

    (digest,) = health_of([record], tmp_path)
    assert digest.unobserved == [] and digest.verdict == "healthy", digest

    atif = gym_rollout_to_atif(record, session_id="s", agent_version="0.1")
    assert [step.source for step in atif.steps] == ["system", "user", "agent", "agent"]
    assert atif.final_metrics.total_completion_tokens == body["generated_tokens"]


async def test_a_collector_without_capture_still_observes_every_rollout(
    runtime_with_capture, tmp_path: Path
) -> None:
    """The README's plain `ng_collect_rollouts` (no observability flags of its own) against an
    agent with observability on: the agent's record alone makes each rollout observed."""
    runtime = await runtime_with_capture([CALL, ANSWER], tmp_path / "capture")
    bodies = []
    for rollout in range(2):
        outcome = await runtime.run(row(_ng_task_index=0, _ng_rollout_index=rollout))
        assert outcome.status == 200, outcome.body
        bodies.append(outcome.body)
    records = [collected(body, None) for body in bodies]
    digests = health_of(records, tmp_path)
    assert [(d.verdict, d.unobserved) for d in digests] == [("healthy", [])] * 2
    for record in records:
        gym_rollout_to_atif(record, session_id="s", agent_version="0.1")


async def test_an_answer_without_tools_exports_to_atif_as_is(runtime_with_capture, tmp_path: Path) -> None:
    capture = tmp_path / "capture"
    runtime = await runtime_with_capture([ANSWER], capture)
    outcome = await runtime.run(row(**INDICES))
    assert outcome.status == 200, outcome.body
    record = collected(outcome.body, capture)
    atif = gym_rollout_to_atif(record, session_id="s", agent_version="0.1")
    assert [step.source for step in atif.steps] == ["system", "user", "agent"]
    assert atif.final_metrics.total_completion_tokens == outcome.body["generated_tokens"]


async def test_with_observability_off_only_the_bundle_travels_and_nothing_is_written(
    runtime_with_capture, tmp_path: Path
) -> None:
    runtime = await runtime_with_capture([ANSWER], None)
    outcome = await runtime.run(row(**INDICES))
    assert outcome.status == 200
    bundle = AgentObservationBundle.model_validate(outcome.body["ng_agent_observations"])
    (invocation,) = bundle.records
    assert invocation.status == "completed" and len(invocation.model_calls) == 1
    assert "ng_trajectory" not in outcome.body
    assert not list(tmp_path.iterdir())


async def test_seed_tool_and_verify_calls_are_made_in_the_rollouts_context() -> None:
    """Gym prefixes a resources-server call with its rollout id (`/ng-rollout/<id>/...`) from the
    rollout context: every call of a rollout carries it, not only `/verify`."""
    resources = FakeResources(reward=1.0)
    settings = ProRLAgentSettings(pipeline=PipelineConfig(init_workers=2, run_workers=2, eval_workers=2))
    access = ResolvedModelAccess(
        LLMConfig(backends=["http://127.0.0.1:9"], dialect="vllm", model="m", health_path=None), "backends"
    )
    runtime = ProRLGymRuntime(settings, {"prorl_math": "prorl_math"}, lambda: resources, access)
    runtime.llm.dialect = ScriptedDialect([CALL, ANSWER])
    try:
        outcome = await runtime.run(row(**INDICES))
    finally:
        await runtime.close()
    assert outcome.status == 200, outcome.body
    assert resources.rollout_ids == [("/seed_session", "3-1"), ("/ipython", "3-1"), ("/verify", "3-1")]


# What the README runs: `prorl gym up`'s compositions, the catalog entries, the servers' own configs.
COMPOSITIONS = [
    *(compose([domain]) for domain in (*DOMAINS, "mixed")),
    *([f"environments/prorl_{name}/config.yaml"] for name in (*DOMAINS, "mixed")),
    *([f"resources_servers/prorl_{domain}/configs/prorl_{domain}.yaml"] for domain in DOMAINS),
]


@pytest.mark.parametrize("paths", COMPOSITIONS, ids=lambda paths: paths[0])
def test_every_composition_keeps_gyms_observability_on(
    paths: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NEMO_GYM_EXTRA_ROOTS", str(project_root()))
    monkeypatch.chdir(project_root())
    config = parse_global_config({"config_paths": paths})
    directory = capture_dir(config)  # Gym's own validation: on, with an absolute directory
    assert directory is not None and directory.is_absolute()


def test_the_stack_tells_its_collector_where_it_captures(tmp_path: Path) -> None:
    state = StackState(
        started_at=0.0, workdir=str(tmp_path), head_url="http://127.0.0.1:11000", config_paths=[],
        model_url="http://127.0.0.1:8000", model_name="m", capture_dir=str(tmp_path / "model-calls"),
    )  # fmt: skip
    line = collect_command(state, "rows.jsonl", "out.jsonl")
    assert line.startswith("ng_collect_rollouts +head_server.port=11000 +agent_name=prorl_agent")
    assert f"+observability_enabled=true +model_call_capture_dir={tmp_path / 'model-calls'}" in line
    off = collect_command(state.model_copy(update={"capture_dir": None}), "rows.jsonl", "out.jsonl")
    assert "observability" not in off and "capture" not in off


def test_capture_dir_follows_gyms_global_config(tmp_path: Path) -> None:
    assert capture_dir({}) is None
    assert capture_dir({"observability_enabled": False, "model_call_capture_dir": str(tmp_path)}) is None
    assert capture_dir({"observability_enabled": True, "model_call_capture_dir": str(tmp_path)}) == tmp_path
    with pytest.raises(ValueError, match="absolute"):
        capture_dir({"observability_enabled": True, "model_call_capture_dir": "relative/dir"})


def test_the_record_is_named_as_gyms_collector_names_the_rollout() -> None:
    assert rollout_identity({"task_id": "t7", **INDICES}, "inv") == ("t7", "3-1")
    assert rollout_identity({**INDICES, "_ng_attempt_index": 2}, "inv") == ("3", "3-1-a2")
    assert rollout_identity({"_ng_rollout_id": "run.9"}, "inv") == ("inv", "run.9")
    # no indices (a trainer's /run), or an id Gym would refuse: the invocation names it
    assert rollout_identity({}, "inv") == ("inv", "inv")
    assert rollout_identity({"_ng_rollout_id": "../x"}, "inv") == ("inv", "inv")


def test_stop_reasons_map_to_gyms_invocation_statuses() -> None:
    assert invocation_status("answered") == invocation_status("submitted") == "completed"
    assert invocation_status("max_turns") == invocation_status("context_length") == "incomplete"
    assert invocation_status("infrastructure_error") == "failed"
