# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The DAPO scheduler's bookkeeping for one prompt in flight: its G samples, their attempts, and
the judgement of the group once all are done."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from nemo_gym_prorl.pipeline.dapo_models import DapoConfig
from nemo_gym_prorl.pipeline.groups import GroupResult, GroupStatus, judge
from nemo_gym_prorl.pipeline.job import JobResult
from nemo_gym_prorl.pipeline.prompt_source import PromptRow


@dataclass
class Sample:
    index: int
    job_id: str | None = None
    attempt: int = 0
    priority: int = 0
    result: JobResult | None = None
    valid: bool = False
    done: bool = False
    finished: int = 0  # DONE/FAILED rollouts of this sample (all attempts)


@dataclass
class PromptGroup:
    seq: int
    group_id: str
    prompt: PromptRow
    started_batch: int
    started_at: float
    samples: list[Sample]
    failures: list[str] = field(default_factory=list)
    retries: int = 0

    def finished(self) -> int:
        return sum(s.finished for s in self.samples)

    def valid_finished(self) -> int:
        return sum(1 for s in self.samples if s.done and s.valid)

    def live_jobs(self) -> list[Sample]:
        return [s for s in self.samples if not s.done and s.job_id is not None]

    def judge(self, config: DapoConfig, batch_index: int) -> GroupResult:
        """The group's verdict once every sample is done (a failed sample fails it under `fail_group`)."""
        rewards = [s.result.reward if s.valid and s.result else None for s in self.samples]
        if config.on_sample_failure == "fail_group" and any(r is None for r in rewards):
            status, mean, std = GroupStatus.FAILED, None, None
        else:
            status, mean, std = judge(rewards, config.uniform)
        return GroupResult(
            group_id=self.group_id,
            prompt_key=self.prompt.key,
            status=status,
            batch_index=batch_index,
            started_batch=self.started_batch,
            rewards=rewards,
            reward_mean=mean,
            reward_std=std,
            masked=[r is None for r in rewards],
            rollouts_spent=self.finished(),
            retries=self.retries,
            failures=self.failures,
            elapsed_s=time.monotonic() - self.started_at,
            row=self.prompt.row,
            samples=[s.result for s in self.samples if s.result is not None],
        )
