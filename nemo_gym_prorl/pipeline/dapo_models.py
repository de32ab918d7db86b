# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""What a DAPO batch is asked for and what it reports: the config, a batch's stats, its events."""

from __future__ import annotations

import time
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from nemo_gym_prorl.pipeline.groups import GroupResult, GroupStatus, UniformRule
from nemo_gym_prorl.pipeline.job import Budget


class DapoConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    group_size: int = Field(8, ge=1, le=1024, description="G: samples per prompt.")
    batch_groups: int = Field(16, ge=1, le=100_000, description="B: informative groups per batch (default).")
    max_prompts_in_flight: int = Field(32, ge=1, le=100_000, description="M: prompts running at once.")
    max_rollouts_in_flight: int | None = Field(
        None,
        ge=1,
        le=10_000_000,
        description="R: rollouts running at once. A new prompt starts as soon as its G samples fit, "
        "so the samples of a group that finish early make room while its last one still runs "
        "(default: only M bounds).",
    )
    uniform: UniformRule = Field(default_factory=UniformRule)
    on_ready: Literal["carry_over", "cancel"] = Field(
        "carry_over", description="What happens to in-flight jobs once B groups are ready."
    )
    priority: int = Field(0, ge=-1000, le=1000, description="Priority of new prompts' jobs.")
    carry_priority: int = Field(
        100, ge=-1000, le=1000, description="Priority of carried-over and retried jobs (run first)."
    )
    max_sample_retries: int = Field(2, ge=0, le=100, description="Retries of an infrastructure failure.")
    on_sample_failure: Literal["fail_group", "mask"] = Field(
        "fail_group",
        description="A sample still failing after retries fails its group, or is masked (the "
        "group is judged on its valid samples; at least 2 needed).",
    )
    max_failed_groups: int | None = Field(
        16, ge=1, description="A batch ends with status 'failed' after this many failed groups."
    )
    dropped_with_samples: bool = Field(
        False,
        description="Send dropped (uniform/failed) groups with their samples, not a summary: for "
        "reporting every rollout (e.g. the demo); costs memory where batch events are retained.",
    )
    task: str | None = Field(None, description="Task handler; default: each row's `data_source`.")
    sampling_params: dict[str, Any] = Field(default_factory=dict)
    budget: Budget = Field(default_factory=Budget)

    @model_validator(mode="after")
    def _a_group_fits(self) -> Self:
        if self.max_rollouts_in_flight is not None and self.max_rollouts_in_flight < self.group_size:
            raise ValueError(
                f"max_rollouts_in_flight={self.max_rollouts_in_flight} is below group_size={self.group_size}: "
                "no prompt could ever start"
            )
        return self


BatchStatus = Literal["running", "complete", "exhausted", "failed", "cancelled"]


class BatchStats(BaseModel):
    """What one batch cost. `rollouts_spent` counts finished rollouts of the groups judged in
    this batch (retries included) plus those thrown away at its end; divided by the informative
    groups it is the price of one useful group."""

    batch_index: int
    requested_groups: int
    status: BatchStatus = "running"
    error: str | None = None
    informative_groups: int = 0
    uniform_groups: int = 0
    failed_groups: int = 0
    carried_groups_delivered: int = Field(0, description="Informative groups whose prompt started earlier.")
    prompts_started: int = 0
    rollouts_submitted: int = Field(0, description="Jobs submitted (retries and re-queues included).")
    rollouts_finished: int = Field(0, description="Jobs that ended DONE or FAILED during the batch.")
    retries: int = 0
    rollouts_spent: int = 0
    rollouts_per_informative_group: float | None = None
    discarded_finished_rollouts: int = Field(
        0, description="Finished rollouts thrown away at the batch's end (0 with carry-over)."
    )
    cancelled_rollouts: int = Field(0, description="Unfinished jobs cancelled at the batch's end.")
    carried_prompts: int = Field(0, description="Prompts left running for the next batch.")
    carried_ready_groups: int = Field(
        0, description="Groups judged after B was reached, kept for the next batch."
    )
    carried_finished_rollouts: int = Field(
        0, description="Finished rollouts of carried prompts and ready groups, all kept."
    )
    requeued_jobs: int = Field(0, description="Queued carried jobs re-queued at carry priority.")
    elapsed_s: float = 0.0
    time_to_first_group_s: float | None = None
    source: dict[str, Any] = Field(default_factory=dict)

    def record_group(self, group: GroupResult, started: float, with_samples: bool) -> BatchEvent:
        """Count a judged group into this batch and turn it into the event that delivers it."""
        group.batch_index = self.batch_index
        group.carried_over = group.started_batch < self.batch_index
        self.rollouts_spent += group.rollouts_spent
        if group.status is GroupStatus.INFORMATIVE:
            self.informative_groups += 1
            self.carried_groups_delivered += int(group.carried_over)
            if self.time_to_first_group_s is None:
                self.time_to_first_group_s = time.monotonic() - started
            self.update_ratio()
            return BatchEvent(type="group", group=group)
        if group.status is GroupStatus.UNIFORM:
            self.uniform_groups += 1
        else:
            self.failed_groups += 1
        self.update_ratio()
        return BatchEvent(type="dropped", group=group if with_samples else group.summary())

    def update_ratio(self) -> None:
        if self.informative_groups:
            self.rollouts_per_informative_group = self.rollouts_spent / self.informative_groups


class BatchEvent(BaseModel):
    """One streamed item: an informative group, a dropped group (summary only), or the end."""

    type: Literal["group", "dropped", "end"]
    group: GroupResult | None = None
    stats: BatchStats | None = None


class BatchFailedError(RuntimeError):
    def __init__(self, stats: BatchStats) -> None:
        super().__init__(f"batch {stats.batch_index} {stats.status}: {stats.error}")
        self.stats = stats
