# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""A scripted handler whose script varies per sample of a prompt group (DAPO tests, benchmark).

The plain `ScriptedHandler` scripts a job from `instance["script"]`; every sample of a group
shares the instance, so every sample would get the same reward. Here `instance["samples"][k]`
overrides the script for sample k (the scheduler puts k and the attempt number in
`metadata["dapo"]`), which gives each group a chosen reward spread and duration per sample.

Per-sample keys: any `Script` field (`run_s`, `reward`, ...), plus `fail_attempts: n` (the first
n attempts fail in `fail_stage`, default run) and `mask_attempts: n` (the first n attempts end
DONE with `report.mask_sample`, as an evaluator whose infrastructure failed).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import Field

from nemo_gym_prorl.pipeline.job import Evaluation, Job, Stage, Trajectory
from support.scripted_stages import Script, ScriptedHandler, ScriptedState

if TYPE_CHECKING:
    from nemo_gym_prorl.agent.deps import HandlerDeps


def _sample_and_attempt(job: Job) -> tuple[int | None, int]:
    dapo = job.metadata.get("dapo") or {}
    sample = dapo.get("sample")
    return (int(sample) if sample is not None else None), int(dapo.get("attempt", 0))


class SampleScript(Script):
    mask_sample: bool = Field(False, description="EVAL reports an infrastructure failure.")

    def merged(self, job: Job) -> SampleScript:
        base = super().merged(job)
        samples = job.instance.get("samples")
        index, attempt = _sample_and_attempt(job)
        if not samples or index is None:
            return SampleScript.model_validate(base.model_dump())
        override: dict[str, Any] = dict(samples[index % len(samples)])
        fail_attempts = int(override.pop("fail_attempts", 0))
        fail_stage = override.pop("fail_stage", Stage.RUN)
        mask_attempts = int(override.pop("mask_attempts", 0))
        merged = {**base.model_dump(), **override}
        merged["fail"] = fail_stage if attempt < fail_attempts else merged.get("fail")
        merged["mask_sample"] = attempt < mask_attempts
        return SampleScript.model_validate(merged)


class GroupScriptedHandler(ScriptedHandler):
    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.defaults = SampleScript.model_validate(self.defaults.model_dump())

    async def evaluate(self, job: Job, state: ScriptedState | None, trajectory: Trajectory) -> Evaluation:
        evaluation = await super().evaluate(job, state, trajectory)
        script = self.defaults.merged(job)
        if isinstance(script, SampleScript) and script.mask_sample:
            # What a task's evaluator returns when its own infrastructure failed.
            return Evaluation(
                reward=0.0,
                report={"reason": "infrastructure_error", "detail": "scripted", "mask_sample": True},
            )
        return evaluation


def build_group_scripted(deps: HandlerDeps, **options: Any) -> GroupScriptedHandler:
    """Factory for `tasks.<name>.handler` in the service config."""
    return GroupScriptedHandler(**options)
