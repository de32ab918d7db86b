# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Pool sizes, queue bounds, budgets and retention of the pipeline."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from nemo_gym_prorl.llm.staleness import StalenessPolicy


class PipelineConfig(BaseModel):
    """Defaults follow ProRL Agent's (64 INIT and RUN workers, EVAL = RUN, 300 s active budget)."""

    model_config = ConfigDict(extra="forbid")

    init_workers: int = Field(64, ge=1, le=100_000)
    run_workers: int = Field(64, ge=1, le=100_000)
    eval_workers: int = Field(64, ge=1, le=100_000)
    max_queued: int = Field(
        10_000, ge=1, description="Jobs waiting for INIT; submissions beyond it are refused (429)."
    )
    run_queue_size: int | None = Field(
        None,
        ge=1,
        description="Initialised jobs waiting for RUN (each holds a live sandbox). Default: run_workers. "
        "When full, INIT workers wait: backpressure instead of piling up sandboxes.",
    )
    eval_queue_size: int | None = Field(
        None, ge=1, description="Jobs waiting for EVAL. Default: eval_workers."
    )
    active_time_s: float = Field(300.0, gt=0, description="Default active-time budget per job.")
    wall_time_s: float | None = Field(
        None, gt=0, description="Default per-request deadline including queue waits (None: none)."
    )
    init_pace_lag_s: float | None = Field(
        0.05,
        ge=0,
        description="INIT starts no new rollout while the service's event loop runs later than this "
        "(its last few ticks), for at most 10 s per rollout: a burst of rollouts then starts as fast as the "
        "loop can drive them, and the loop stays responsive to the rollouts already running. Counted as "
        "INIT queue time. None: no pacing.",
    )
    max_retained_results: int = Field(10_000, ge=1, description="Finished results kept for fetching.")
    max_retained_bytes: int = Field(
        2 << 30,
        ge=1,
        description="Bytes of finished results kept in memory for fetching (2 GiB; each result is held "
        "as its JSON, and counts its length). Beyond this or max_retained_results the "
        "oldest fetched results go first, then the oldest unfetched; with a journal they are still "
        "served, read back from it, else a fetch gets 410. A single result bigger than this is "
        "kept until the next one finishes.",
    )
    max_evicted_ids: int = Field(100_000, ge=0, description="Evicted ids remembered to answer 410.")
    cancel_wait_s: float = Field(
        10.0, gt=0, description="How long a cancel waits for the job's resources to be released."
    )
    deadline_check_s: float = Field(0.5, gt=0, description="How often queued jobs are checked for deadlines.")
    staleness: StalenessPolicy = Field(
        default_factory=StalenessPolicy,
        description="The bound on off-policy rollouts (policy versions behind the trainer) and its action.",
    )

    @model_validator(mode="after")
    def _fill_queue_sizes(self) -> PipelineConfig:
        if self.run_queue_size is None:
            self.run_queue_size = self.run_workers
        if self.eval_queue_size is None:
            self.eval_queue_size = self.eval_workers
        return self
