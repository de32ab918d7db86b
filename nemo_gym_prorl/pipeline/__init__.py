# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The asynchronous INIT -> RUN -> EVAL rollout pipeline: jobs, budgets, cancellation, pools."""

from nemo_gym_prorl.pipeline.config import PipelineConfig
from nemo_gym_prorl.pipeline.engine import (
    DuplicateJobError,
    Pipeline,
    PipelineClosedError,
    PipelineStatus,
    StageStatus,
)
from nemo_gym_prorl.pipeline.executor import InProcessExecutor, StageExecutor
from nemo_gym_prorl.pipeline.handler import (
    HandlerRegistry,
    InvalidInstanceError,
    RolloutFailure,
    RolloutHandler,
    UnknownTaskError,
)
from nemo_gym_prorl.pipeline.job import (
    Budget,
    CriticalError,
    Evaluation,
    FailureClass,
    Job,
    JobResult,
    JobSpec,
    JobState,
    Stage,
    Timing,
    Trajectory,
)
from nemo_gym_prorl.pipeline.queue import QueueFullError
from nemo_gym_prorl.pipeline.store import JobNotFoundError

__all__ = [
    "Budget",
    "CriticalError",
    "DuplicateJobError",
    "Evaluation",
    "FailureClass",
    "HandlerRegistry",
    "InProcessExecutor",
    "InvalidInstanceError",
    "Job",
    "JobNotFoundError",
    "JobResult",
    "JobSpec",
    "JobState",
    "Pipeline",
    "PipelineClosedError",
    "PipelineConfig",
    "PipelineStatus",
    "QueueFullError",
    "RolloutFailure",
    "RolloutHandler",
    "Stage",
    "StageExecutor",
    "StageStatus",
    "Timing",
    "Trajectory",
    "UnknownTaskError",
]
