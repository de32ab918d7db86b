# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Where a stage actually executes: the seam that lets stage workers live elsewhere later.

The pipeline decides *when* a stage of a job runs (queues, priorities, budgets, cancellation);
a `StageExecutor` decides *where*. `InProcessExecutor` awaits the handler in this event loop.

How a Ray executor maps onto this (not implemented yet):
- One Ray actor class hosting a `HandlerRegistry` (built from the same task config), created
  per node or per stage pool with `max_concurrency` = that pool's worker count (async actor).
- `init` calls `actor.init.remote(job)` on the least-loaded actor; the actor keeps the real
  state (sandbox, kernel, tool processes live on the actor's node) in a dict keyed by job id
  and returns a small picklable handle `(actor_id, job_id)`; that handle is what the pipeline
  stores as the job's state.
- `run`, `evaluate` and `release` route by the handle to the same actor (sticky), so the
  sandbox never crosses nodes; an EVAL that needs no RUN state may go to any EVAL actor.
- Cancellation: the pipeline cancels the awaiting task; the executor forwards it with
  `ray.cancel(ref)` (async actors receive CancelledError in the stage coroutine) and then calls
  `release` on the handle. Actor death is reported as a stage failure (critical_error = stage).
- `close()` releases every handle still held and kills the actors (their sandboxes die with
  them: bubblewrap is started with --die-with-parent).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from nemo_gym_prorl.pipeline.handler import RolloutHandler
from nemo_gym_prorl.pipeline.job import Evaluation, Job, Trajectory


class StageExecutor(Protocol):
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
