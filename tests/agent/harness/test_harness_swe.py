# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""mini-swe-agent on a real generated SWE instance: the patch it leaves in the repository is
graded by the SWE domain's own FAIL_TO_PASS / PASS_TO_PASS evaluation, and with the real
embedded model every call it makes is recorded token-exact."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
from harness_helpers import ScriptedLLM, harness_job, run_rollout

from nemo_gym_prorl.agent.deps import HandlerDeps
from nemo_gym_prorl.agent.factory import domain_handler
from nemo_gym_prorl.agent.handler import AgentRolloutHandler
from nemo_gym_prorl.agent.harness import runner as runner_module
from nemo_gym_prorl.agent.harness.token_capture import chain_fields, read_rollout, write_harness_record
from nemo_gym_prorl.agent.harness.trajectory import agent_trajectory
from nemo_gym_prorl.datasets.swe import swe_rows
from nemo_gym_prorl.llm import LLMBackendPool, PoolConfig, VLLMCompletionsDialect
from nemo_gym_prorl.llm.access import LLMAccess
from nemo_gym_prorl.llm.embedded import VLLMServer
from nemo_gym_prorl.llm.recording import HarnessRecord
from nemo_gym_prorl.rollouts.results import ModelTurn, concatenate
from nemo_gym_prorl.sandbox import SandboxSpec
from nemo_gym_prorl.tasks.swe import ensure_built

pytestmark = [pytest.mark.bwrap, pytest.mark.slow]

SUBMIT = "THOUGHT: the fix is in.\n\n```mswea_bash_command\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```"


async def toolz_instance() -> tuple[dict[str, Any], dict[str, Any]]:
    """A built instance (its gold patch) and its row as the service gets it: what the agent
    may see and the id, completed from the built cache at EVAL."""
    instance = next(i for i in await ensure_built() if "toolz" in i["instance_id"])
    return instance, swe_rows([instance], compact=True)[0]


def mini_swe_agent_handler(llm: LLMAccess, max_turns: int) -> AgentRolloutHandler:
    """The SWE domain's handler with mini-swe-agent driving RUN."""
    return domain_handler(
        HandlerDeps(sandbox=SandboxSpec(), llm=llm),
        domain="swe",
        agent={"max_turns": max_turns},
        harness={"name": "mini_swe_agent"},
    )


def apply_patch_reply(patch: str) -> str:
    return f"THOUGHT: apply the fix.\n\n```mswea_bash_command\ngit apply <<'PATCH'\n{patch}PATCH\n```"


async def test_the_patch_a_harness_leaves_in_the_repository_is_graded_as_any_swe_patch(
    scripted_llm: ScriptedLLM,
) -> None:
    instance, row = await toolz_instance()
    llm = await scripted_llm(apply_patch_reply(instance["patch"]), SUBMIT)
    handler = mini_swe_agent_handler(llm, max_turns=4)
    # the whole patch in one reply: more tokens than the scripted policy's default limit
    job = harness_job(row, "swe-harness-gold", task="swe").model_copy(
        update={"sampling_params": {"max_tokens": 4096}}
    )
    trajectory, evaluation = await run_rollout(handler, job)

    assert trajectory.stop_reason == "submitted"
    assert evaluation.reward == 1.0, evaluation.report  # FAIL_TO_PASS and PASS_TO_PASS all pass
    assert evaluation.report["pass_rates"]["FAIL_TO_PASS"] == 1.0


async def test_a_harness_that_changes_nothing_resolves_nothing(scripted_llm: ScriptedLLM) -> None:
    _, row = await toolz_instance()
    llm = await scripted_llm(SUBMIT)
    handler = mini_swe_agent_handler(llm, max_turns=2)
    trajectory, evaluation = await run_rollout(handler, harness_job(row, "swe-harness-empty", task="swe"))
    assert trajectory.stop_reason == "submitted" and evaluation.reward == 0.0


@pytest.mark.vllm
async def test_mini_swe_agent_with_the_real_model_records_every_call_token_exact(
    real_vllm: VLLMServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    recorded: list[HarnessRecord] = []  # the endpoint's record of the rollout, as the runner gets it

    def keep(run: Any, record: HarnessRecord, *args: Any, **kwargs: Any) -> Any:
        recorded.append(record)
        return agent_trajectory(run, record, *args, **kwargs)

    monkeypatch.setattr(runner_module, "agent_trajectory", keep)
    _, row = await toolz_instance()
    async with LLMBackendPool(PoolConfig(backends=[real_vllm.base_url], api_key=real_vllm.api_key)) as pool:
        llm = LLMAccess(pool=pool, dialect=VLLMCompletionsDialect(), model=real_vllm.spec.served_model_name)
        handler = mini_swe_agent_handler(llm, max_turns=3)
        job = harness_job(row, "swe-harness-real", task="swe").model_copy(
            update={"sampling_params": {"temperature": 1.0, "max_tokens": 48}, "active_time_s": 300}
        )
        trajectory, evaluation = await run_rollout(handler, job)

    record = trajectory.harness
    assert record is not None and record["name"] == "mini_swe_agent"
    assert 1 <= record["calls"] <= 3
    assert trajectory.num_turns == record["calls"]  # every call recorded, once
    segments = record["token_segments"]
    replies = [m for m in trajectory.messages if m["role"] == "assistant"]  # the delivered sequence
    for turn in [
        *(t for segment in segments for t in segment),
        *replies,
    ]:  # the backend's own ids and log-probs
        assert len(turn["generation_token_ids"]) == len(turn["generation_log_probs"]) > 0
    # Every call is in exactly one segment, each segment one token sequence (what slots deliver).
    assert [len(segment) for segment in segments] and sum(map(len, segments)) == record["calls"]
    for segment in segments:
        for previous, current in itertools.pairwise(segment):
            history = previous["prompt_token_ids"] + previous["generation_token_ids"]
            assert current["prompt_token_ids"][: len(history)] == history
    assert record["merged_share"] is None or record["merged_share"] == (
        record["calls"] - record["segments"]
    ) / (record["calls"] - 1)
    # mini-swe-agent leaves a reply it answers with a format error out of its history (the
    # 135M model rarely writes exactly one bash block in 48 tokens), so the next call rewrites
    # history and starts a new segment. A segment ends for no other reason.
    dropped = record["calls"] - len(replies)
    assert record["segments"] - 1 <= dropped
    # Within the delivered sequence each call extends the last, token for token.
    for previous, current in itertools.pairwise(replies):
        history = previous["prompt_token_ids"] + previous["generation_token_ids"]
        assert current["prompt_token_ids"][: len(history)] == history
    # whatever the 135M model typed, the rollout ended by the harness's own rules, not a failure
    assert trajectory.stop_reason in {"submitted", "max_turns", "model_error", "context_length"}
    assert evaluation.reward in (0.0, 1.0) and not evaluation.report.get("mask_sample")

    # Written as NeMo Gym token-capture records, the real rollout loads in Gym's own builder into
    # the very sequences the project trains on: one chain per segment.
    (record,) = recorded
    await write_harness_record(record, rollout_id="swe-harness-real", model="policy", sink=tmp_path)
    gym = await read_rollout("swe-harness-real", tmp_path, model="policy")
    expected = [concatenate([ModelTurn.model_validate(t) for t in segment]) for segment in segments]
    assert sorted(chain_fields(chain) for chain in gym.chains) == sorted(expected)
    assert gym.mask_sample == (len(segments) > 1)  # Gym masks a rollout whose chain broke
