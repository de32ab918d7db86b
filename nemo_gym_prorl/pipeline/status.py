# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""What the pipeline reports about itself: per-stage pools and queues, totals, nodes."""

from __future__ import annotations

from pydantic import BaseModel, Field

from nemo_gym_prorl.pipeline.executor import NodeStatus
from nemo_gym_prorl.pipeline.job import JobState, Stage


class StageStatus(BaseModel):
    workers: int
    queued: int
    queue_capacity: int
    in_flight: int


class PipelineStatus(BaseModel):
    running: bool
    stages: dict[Stage, StageStatus]
    live_jobs: int
    retained_results: int = Field(description="Finished results held in memory for fetching.")
    retained_bytes: int = Field(0, description="Their size: the length of their JSON, as they are held.")
    max_retained_results: int = Field(0, description="The count budget (pipeline.max_retained_results).")
    max_retained_bytes: int = Field(0, description="The byte budget (pipeline.max_retained_bytes).")
    submitted_total: int
    finished_total: dict[JobState, int]
    critical_errors_total: dict[str, int]
    evicted_total: int = Field(description="Results pushed out of memory by either budget (spilled or not).")
    spilled_total: int = Field(
        0, description="Of those, results a journal holds: still served, read back from it."
    )
    infra_retries_total: int = 0
    stale_total: dict[str, int] = Field(
        default_factory=dict, description="Rollouts past max_staleness, by action (rerun, drop, flag)."
    )
    policy_version: int | None = Field(None, description="The trainer's current policy version, if known.")
    nodes: list[NodeStatus] = Field(
        default_factory=list, description="Where jobs run (empty for the in-process executor)."
    )


class StageTotals:
    """Sums for the metrics endpoint (seconds and counts per stage)."""

    def __init__(self) -> None:
        self.active_s = dict.fromkeys(Stage, 0.0)
        self.wait_s = dict.fromkeys(Stage, 0.0)
        self.count = dict.fromkeys(Stage, 0)
