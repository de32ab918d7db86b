# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Helpers of the harness tests (a uniquely named module: several test dirs have a conftest)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from nemo_gym_prorl.agent.handler import AgentRolloutHandler
from nemo_gym_prorl.llm.access import LLMAccess
from nemo_gym_prorl.pipeline.job import Evaluation, Job, Trajectory

ScriptedLLM = Callable[..., Awaitable[LLMAccess]]


def harness_job(instance: dict[str, Any], job_id: str = "harness-1", task: str = "math") -> Job:
    return Job(
        id=job_id,
        task=task,
        instance=instance,
        sampling_params={},
        priority=0,
        active_time_s=60,
        wall_time_s=None,
        group_id=None,
        metadata={},
    )


async def run_rollout(handler: AgentRolloutHandler, job: Job) -> tuple[Trajectory, Evaluation]:
    """One rollout through the handler's stages as the pipeline runs them (validate at the
    door, INIT, RUN, release, EVAL), then the handler closed."""
    handler.validate(job.instance)
    state = await handler.init(job)
    try:
        trajectory = await handler.run(job, state)
    finally:
        await handler.release(state)
    try:
        return trajectory, await handler.evaluate(job, None, trajectory)
    finally:
        await handler.aclose()


def prompt_row(text: str, **fields: Any) -> dict[str, Any]:
    return {"responses_create_params": {"input": [{"role": "user", "content": text}]}, **fields}
