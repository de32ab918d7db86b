# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""What runs on a Ray node: the rollout actor that holds its jobs' state between stages, and what
it is built from (`NodeBuilder` -> `NodeRuntime`) and told (`NodeShare`).

The Ray executor (`ray_executor.RayExecutor`) wraps `RolloutNode` with `ray.remote` and places
one on each eligible node; the process executor (`process_executor`) runs one in each of its
worker processes. The actor builds its own handlers (and LLM pool share) by calling the
picklable `NodeBuilder` it was given, so sandboxes, kernels and tool processes live on that node
and never cross the network. Nothing here imports Ray at module level.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from nemo_gym_prorl.llm.slot_wait import listen
from nemo_gym_prorl.pipeline.executor import NodeStatus, as_evaluation, as_trajectory
from nemo_gym_prorl.pipeline.handler import HandlerRegistry, RolloutHandler
from nemo_gym_prorl.pipeline.job import Evaluation, Job, Trajectory

logger = logging.getLogger(__name__)


@dataclass
class NodeRuntime:
    """What a node's actor serves: the handlers, an optional LLM backend registry to keep in
    step with the service's (with `reshare(NodeShare)` when the node count changes), and how
    to close them."""

    handlers: HandlerRegistry
    backends: Any | None = None
    close: Callable[[], Awaitable[None]] | None = None


@dataclass(frozen=True)
class NodeShare:
    """This node's place among the live nodes: it takes 1/count of shared caps."""

    index: int
    count: int

    def of(self, total: int) -> int:
        return max(1, math.ceil(total / self.count))


NodeBuilder = Callable[[NodeShare], Awaitable[NodeRuntime]]
"""Picklable (a module-level function or a functools.partial of one): runs on the node."""


StageEvent = tuple[str, Any]
"""What a stage streams to the service: ("slot_wait", True|False) as a model-slot wait begins or
ends, then ("result", the stage's result)."""


class _QueuedSlotWaits:
    """A stage's slot waits (True: began, False: ended), queued for the service."""

    def __init__(self) -> None:
        self.events: asyncio.Queue[bool] = asyncio.Queue()

    def slot_wait_began(self) -> None:
        self.events.put_nowait(True)

    def slot_wait_ended(self) -> None:
        self.events.put_nowait(False)


@dataclass(frozen=True)
class RayJobHandle:
    """What the pipeline holds as a job's state: where it lives, not the state itself."""

    node: str
    job_id: str
    task: str


class RolloutNode:
    """The actor (wrapped with `ray.remote` at start): a job's state lives here between stages."""

    def __init__(self, build: NodeBuilder, share: NodeShare, node_id: str | None = None) -> None:
        self._build = build
        self._share = share
        self._node_id = node_id  # None: the Ray node it runs on
        self._runtime: NodeRuntime | None = None
        self._states: dict[str, tuple[str, Any]] = {}  # job id -> (task, handler state)
        self._tasks: dict[str, asyncio.Task[Any]] = {}

    async def ready(self) -> dict[str, Any]:
        if self._runtime is None:
            self._runtime = await self._build(self._share)
        if self._node_id is None:
            import ray

            self._node_id = ray.get_runtime_context().get_node_id()
        return {"node": self._node_id, "pid": os.getpid()}

    def _handler(self, task: str) -> RolloutHandler:
        assert self._runtime is not None, "ready() first"
        return self._runtime.handlers.get(task)

    async def _tracked(self, job_id: str, coro: Awaitable[Any]) -> Any:
        """Run one stage of a job as its own task, so `abort` can cancel it by job id."""
        task = asyncio.ensure_future(coro)
        self._tasks[job_id] = task
        try:
            return await task
        finally:
            if self._tasks.get(job_id) is task:
                del self._tasks[job_id]

    async def _stage(self, job_id: str, coro: Awaitable[Any]) -> AsyncIterator[StageEvent]:
        """Run one stage of a job (`_tracked`), streaming its model-slot waits as they begin and
        end, then its result: the job's budget is kept by the service, whose clock must stand
        still while a turn here waits for a slot, as it does for a turn in its own process."""
        waits = _QueuedSlotWaits()
        with listen(waits):
            stage = asyncio.ensure_future(self._tracked(job_id, coro))
        try:
            while True:
                while not waits.events.empty():
                    yield ("slot_wait", waits.events.get_nowait())
                if stage.done():
                    break
                event = asyncio.ensure_future(waits.events.get())
                await asyncio.wait({stage, event}, return_when=asyncio.FIRST_COMPLETED)
                if event.done():
                    yield ("slot_wait", event.result())
                else:
                    event.cancel()
            yield ("result", stage.result())
        finally:
            if not stage.done():  # the caller went away: so does the stage
                stage.cancel()

    async def init(self, job: Job) -> AsyncIterator[StageEvent]:
        async def init() -> None:
            self._states[job.id] = (job.task, await self._handler(job.task).init(job))

        async for event in self._stage(job.id, init()):
            yield event

    async def run(self, job: Job) -> AsyncIterator[StageEvent]:
        async def run() -> Trajectory:
            _, state = self._states[job.id]
            return as_trajectory(await self._handler(job.task).run(job, state))

        async for event in self._stage(job.id, run()):
            yield event

    async def evaluate(self, job: Job, with_state: bool, trajectory: Trajectory) -> AsyncIterator[StageEvent]:
        async def evaluate() -> Evaluation:
            state = self._states[job.id][1] if with_state else None
            return as_evaluation(await self._handler(job.task).evaluate(job, state, trajectory))

        async for event in self._stage(job.id, evaluate()):
            yield event

    async def release(self, job_id: str) -> None:
        held = self._states.pop(job_id, None)
        if held is not None:
            task, state = held
            await self._handler(task).release(state)

    async def abort(self, job_id: str) -> None:
        """Cancel the job's running stage (its handler cleans up what it started) and release
        whatever state it holds here."""
        running = self._tasks.get(job_id)
        if running is not None and not running.done():
            running.cancel()
            with contextlib.suppress(BaseException):
                await running
        await self.release(job_id)

    async def ping(self) -> dict[str, Any]:
        return {"jobs": len(self._states), "share": [self._share.index, self._share.count]}

    async def reshare(self, share: NodeShare) -> None:
        """The live node count changed: take `share` of the shared caps from now on."""
        self._share = share
        backends = self._runtime.backends if self._runtime is not None else None
        if backends is not None and hasattr(backends, "reshare"):
            backends.reshare(share)

    async def backends_call(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """Apply a backend change made through the service's API to this node's LLM pool."""
        if self._runtime is not None and self._runtime.backends is not None:
            await getattr(self._runtime.backends, method)(*args, **kwargs)

    async def close(self) -> None:
        for job_id in list(self._tasks):
            task = self._tasks.get(job_id)
            if task is not None:
                task.cancel()
        await asyncio.gather(*self._tasks.values(), return_exceptions=True)
        for job_id in list(self._states):
            try:
                await self.release(job_id)
            except Exception:
                logger.warning("releasing job %s on close failed", job_id, exc_info=True)
        runtime, self._runtime = self._runtime, None
        if runtime is not None and runtime.close is not None:
            await runtime.close()


@dataclass
class PlacedNode:
    """What the executor knows of one node: its actor, its jobs, its health."""

    id: str
    address: str | None
    actor: Any
    slots: int
    pid: int | None = None  # the actor's process, for checks that nothing outlives close()
    jobs: set[str] = field(default_factory=set)
    healthy: bool = True
    last_seen: float = field(default_factory=time.monotonic)
    lost: asyncio.Future[str] = field(default_factory=lambda: asyncio.get_running_loop().create_future())
    placed_total: int = 0
    lost_jobs_total: int = 0
    share: NodeShare | None = None  # the share of the caps this node was last given

    @property
    def alive(self) -> bool:
        return not self.lost.done()

    @property
    def free(self) -> int:
        return self.slots - len(self.jobs)

    def status(self) -> NodeStatus:
        return NodeStatus(
            node=self.id,
            address=self.address,
            healthy=self.healthy and self.alive,
            slots=self.slots,
            in_flight=len(self.jobs),
            placed_total=self.placed_total,
            lost_jobs_total=self.lost_jobs_total,
            share_of=self.share.count if self.share is not None and self.alive else None,
        )
