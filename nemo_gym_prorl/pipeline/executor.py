# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Where a stage actually executes: the seam between the pipeline's schedule and its workers.

The pipeline decides *when* a stage of a job runs (queues, priorities, budgets, cancellation);
a `StageExecutor` decides *where*. `InProcessExecutor` awaits the handler in this event loop;
`nemo_gym_prorl.pipeline.ray_executor.RayExecutor` runs it on an actor on some node of a Ray
cluster and keeps the job's later stages on that node.

An executor that places jobs somewhere may run out of room (`wait_for_capacity`, which the
pipeline counts as queue time) and may lose the place a job ran (`InfrastructureError`, after
which the pipeline re-runs the job from INIT elsewhere, a bounded number of times).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from pydantic import BaseModel, Field

from nemo_gym_prorl.pipeline.handler import RolloutHandler
from nemo_gym_prorl.pipeline.job import Evaluation, Job, Trajectory


class InfrastructureError(RuntimeError):
    """The place a stage ran is gone (a node died or stopped answering): not the job's fault.

    The job's state there is lost with it; the pipeline may run the job again from INIT.
    """

    def __init__(self, message: str, node: str | None = None) -> None:
        super().__init__(message)
        self.node = node


class NodeStatus(BaseModel):
    """One place jobs run, as `/v1/status` and the metrics show it."""

    node: str = Field(description="Ray node id (or `local`).")
    address: str | None = None
    healthy: bool = Field(description="Answers its health checks; unhealthy nodes get no new work.")
    slots: int = Field(description="Jobs with live state (a sandbox) it may hold at once.")
    in_flight: int = Field(description="Jobs holding a slot on it now.")
    placed_total: int = Field(0, description="Jobs placed on it since start.")
    lost_jobs_total: int = Field(0, description="Jobs whose stage it lost (re-run elsewhere).")
    share_of: int | None = Field(
        None, description="It takes 1/share_of of every LLM backend's in-flight cap (the live nodes)."
    )


class StageExecutor(Protocol):
    max_attempts: int
    """How many times a job may be started (INIT) when earlier starts were lost to
    `InfrastructureError`; 1 means never re-run."""

    async def wait_for_capacity(self) -> None:
        """Return once a new job could be placed (queue time for the pipeline)."""
        ...

    def node_of(self, state: Any) -> str | None:
        """Where the job holding `state` runs (None: this process)."""
        ...

    def nodes(self) -> list[NodeStatus]: ...

    async def init(self, handler: RolloutHandler, job: Job) -> Any: ...

    async def run(self, handler: RolloutHandler, job: Job, state: Any) -> Trajectory: ...

    async def evaluate(
        self, handler: RolloutHandler, job: Job, state: Any | None, trajectory: Trajectory
    ) -> Evaluation: ...

    async def release(self, handler: RolloutHandler, state: Any) -> None: ...

    async def close(self) -> None: ...


def as_trajectory(value: Trajectory | Mapping[str, Any]) -> Trajectory:
    return value if isinstance(value, Trajectory) else Trajectory.model_validate(value)


def as_evaluation(value: Evaluation | Mapping[str, Any] | float) -> Evaluation:
    if isinstance(value, Evaluation):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return Evaluation(reward=float(value))
    return Evaluation.model_validate(value)


class InProcessExecutor:
    """Runs each stage as a coroutine in the pipeline's own event loop."""

    max_attempts = 1

    async def wait_for_capacity(self) -> None:
        """Never waits: the pipeline's worker pools are the only bound."""

    def node_of(self, state: Any) -> str | None:
        return None

    def nodes(self) -> list[NodeStatus]:
        return []

    async def init(self, handler: RolloutHandler, job: Job) -> Any:
        return await handler.init(job)

    async def run(self, handler: RolloutHandler, job: Job, state: Any) -> Trajectory:
        return as_trajectory(await handler.run(job, state))

    async def evaluate(
        self, handler: RolloutHandler, job: Job, state: Any | None, trajectory: Trajectory
    ) -> Evaluation:
        return as_evaluation(await handler.evaluate(job, state, trajectory))

    async def release(self, handler: RolloutHandler, state: Any) -> None:
        await handler.release(state)

    async def close(self) -> None:
        """Nothing of its own to close: states are released by the pipeline."""
