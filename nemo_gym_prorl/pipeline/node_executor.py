# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Stages on long-lived rollout nodes, jobs pinned to their node: what every such executor shares.

A node is one `RolloutNode` (`ray_node`) somewhere else: an actor on a Ray node
(`ray_executor.RayExecutor`) or a worker process of this machine
(`process_executor.ProcessExecutor`). The pipeline keeps the schedule (queues, priorities,
budgets, cancellation, DAPO); a node executor only decides where a stage runs:

- INIT goes to the healthy node with the most free slots; RUN, EVAL and release of that job go
  to the same node (the state the pipeline holds is a small `RayJobHandle`). A slot is a job
  with live state on the node; waiting for one is `wait_for_capacity`, which the pipeline
  counts as queue time.
- Cancelling a stage aborts it on the node (its task is cancelled and the job's sandbox
  released there) before the cancellation goes on.
- A node that dies, or stops answering health checks for `node_timeout_s`, is lost: its
  stages fail with `InfrastructureError` (the pipeline re-runs those jobs elsewhere) and it
  gets no new work. Nodes found later get a `RolloutNode` at the next health check.
- Shared caps (each LLM backend's in-flight limit) are split over the live nodes, and split
  again whenever one joins or is lost (`NodeShare`, `RolloutNode.reshare`).

A subclass says how nodes are found and started, and how a call reaches one (`_find`,
`_place`, `_ask`, `_stream`, `_kill`, `_lost_errors`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

from nemo_gym_prorl.llm.slot_wait import tell_slot_wait
from nemo_gym_prorl.pipeline.backend_changes import BackendChanges
from nemo_gym_prorl.pipeline.executor import InfrastructureError, NodeStatus
from nemo_gym_prorl.pipeline.handler import RolloutHandler
from nemo_gym_prorl.pipeline.job import Evaluation, Job, Trajectory
from nemo_gym_prorl.pipeline.ray_node import NodeBuilder, NodeShare, PlacedNode, RayJobHandle, StageEvent

logger = logging.getLogger(__name__)


class NodeExecutor:
    """A `StageExecutor` over one `RolloutNode` per node; subclasses supply the transport."""

    kind = "node"  # how logs and errors name the nodes ("Ray node", "worker process")

    def __init__(
        self,
        build: NodeBuilder,
        *,
        slots_per_node: int,
        max_attempts: int,
        health_interval_s: float,
        node_timeout_s: float,
        start_timeout_s: float,
        no_node_timeout_s: float,
    ) -> None:
        self.max_attempts = max_attempts
        self._build = build
        self._slots_per_node = slots_per_node
        self._health_interval_s = health_interval_s
        self._node_timeout_s = node_timeout_s
        self._start_timeout_s = start_timeout_s
        self._no_node_timeout_s = no_node_timeout_s
        self._nodes: dict[str, PlacedNode] = {}
        self._changed = asyncio.Event()
        self._health: asyncio.Task[None] | None = None
        self._lost_errors: tuple[type[BaseException], ...] = ()
        self._share_count = 1
        self._closed = False
        self._nodeless_since: float | None = None
        self._changes = BackendChanges()

    # -- what a subclass supplies -----------------------------------------------------------
    async def _find(self) -> list[dict[str, Any]]:
        """The nodes that may host a rollout node now: {"NodeID": ..., "NodeManagerAddress": ...}."""
        raise NotImplementedError

    def _place(self, node: dict[str, Any], share: NodeShare) -> Any:
        """Start a `RolloutNode` on `node` with `share`; returns the handle `_ask` calls."""
        raise NotImplementedError

    async def _ask(self, actor: Any, method: str, *args: Any) -> Any:
        """One call of `RolloutNode.method` on the node; its result."""
        raise NotImplementedError

    def _stream(self, actor: Any, method: str, *args: Any) -> AsyncIterator[StageEvent]:
        """One streaming stage call (`RolloutNode.init|run|evaluate`): its events as they come."""
        raise NotImplementedError

    def _kill(self, actor: Any) -> None:
        """End the node's `RolloutNode` for good (no restart); never raises."""
        raise NotImplementedError

    def _unwrap(self, exc: Exception) -> Exception:
        """The handler's own exception inside a transport's wrapper (itself when none)."""
        return exc

    # -- lifecycle --------------------------------------------------------------------------
    async def _start_nodes(self) -> None:
        """Place a node on every one found, waiting `start_timeout_s` for the first."""
        found = await self._find()
        self._share_count = max(1, len(found))
        deadline = time.monotonic() + self._start_timeout_s
        await self._add_nodes(found)
        while not self._nodes:
            if time.monotonic() > deadline:
                await self.close()
                raise RuntimeError(
                    f"no {self.kind} could host a rollout node within {self._start_timeout_s}s "
                    f"({self._where()})"
                )
            await asyncio.sleep(min(1.0, self._health_interval_s))
            await self._add_nodes(await self._find())
        await self._reshare()
        self._health = asyncio.create_task(self._watch(), name=f"{self.kind}-health")

    def _where(self) -> str:
        """What a start that found no node says about where it looked."""
        return ""

    async def _add_nodes(self, found: list[dict[str, Any]]) -> None:
        fresh = [n for n in found if n["NodeID"] not in self._nodes]
        if not fresh:
            return
        # Start with the share they will hold once ready; `_reshare` settles everyone's.
        count = max(self._share_count, sum(n.alive for n in self._nodes.values()) + len(fresh))
        started = []
        for i, node in enumerate(fresh):
            share = NodeShare(index=len(self._nodes) + i, count=count)
            try:
                actor = self._place(node, share)
            except Exception as exc:
                logger.warning("no rollout node on %s %s: %s", self.kind, node["NodeID"], exc)
                continue
            started.append((node, actor, share, self._ask(actor, "ready")))
        for node, actor, share, ready in started:
            try:
                info = await asyncio.wait_for(ready, self._start_timeout_s)
            except Exception as exc:  # the node vanished or its runtime could not be built
                logger.warning("no rollout node on %s %s: %s", self.kind, node["NodeID"], exc)
                self._kill(actor)
                continue
            assert info["node"] == node["NodeID"], "the rollout node started somewhere else"
            try:  # the backends and policy the other nodes serve, before it takes any job
                for method, args, kwargs in self._changes.replay():
                    await asyncio.wait_for(
                        self._ask(actor, "backends_call", method, args, kwargs), self._node_timeout_s
                    )
            except Exception as exc:
                logger.warning(
                    "%s %s could not take the service's backend changes: %s", self.kind, node["NodeID"], exc
                )
                self._kill(actor)
                continue
            self._nodes[node["NodeID"]] = PlacedNode(
                id=node["NodeID"],
                address=node.get("NodeManagerAddress"),
                actor=actor,
                slots=self._slots_per_node,
                pid=info.get("pid"),
                share=share,
            )
            logger.info(
                "rollout node ready on %s %s (%s)", self.kind, node["NodeID"], node.get("NodeManagerAddress")
            )
        self._notify()

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._health is not None:
            self._health.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._health
        # Each node releases what it still holds (sandboxes close), then goes.
        live = [n for n in self._nodes.values() if n.alive]
        await asyncio.gather(
            *(asyncio.wait_for(self._ask(n.actor, "close"), self._node_timeout_s) for n in live),
            return_exceptions=True,
        )
        for node in self._nodes.values():
            self._kill(node.actor)
            if not node.lost.done():
                node.lost.set_result("executor closed")
        self._nodes.clear()
        self._notify()
        await self._after_close()

    async def _after_close(self) -> None:
        """What the transport itself ends once every node is gone."""

    # -- health -----------------------------------------------------------------------------
    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(self._health_interval_s)
            try:
                await self.check_nodes()
            except Exception:
                logger.warning("%s health check failed", self.kind, exc_info=True)

    async def check_nodes(self) -> None:
        """Mark dead or silent nodes lost, find new ones; the health loop calls it."""
        found = await self._find()
        alive_ids = {n["NodeID"] for n in found}
        now = time.monotonic()
        # A busy node may answer slowly; only a third of the loss timeout without an answer
        # makes it unhealthy (no new work), the whole timeout makes it lost.
        patience = max(self._health_interval_s, self._node_timeout_s / 3)
        pings = {
            node.id: asyncio.ensure_future(asyncio.wait_for(self._ask(node.actor, "ping"), patience))
            for node in self._nodes.values()
            if node.alive and node.id in alive_ids
        }
        if pings:
            await asyncio.wait(pings.values())
        for node in list(self._nodes.values()):
            if not node.alive:
                continue
            if node.id not in alive_ids:
                self._lose(node, f"the {self.kind} is gone (or no longer eligible)")
                continue
            ping = pings[node.id]
            if ping.exception() is None:
                node.last_seen, node.healthy = now, True
                self._pinged(node, ping.result())
            elif isinstance(ping.exception(), self._lost_errors):
                self._lose(node, f"its rollout node died: {ping.exception()}")
            else:
                node.healthy = False  # silent: no new work; lost if it stays silent
                if now - node.last_seen > self._node_timeout_s:
                    self._lose(node, f"silent for {now - node.last_seen:.1f}s")
        await self._add_nodes([n for n in found if n["NodeID"] not in self._nodes])
        await self._reshare()
        self._notify()

    def _pinged(self, node: PlacedNode, answer: dict[str, Any]) -> None:
        """What a node's health answer says besides that it lives (a subclass may read it)."""

    async def _reshare(self) -> None:
        """Give every live node 1/N of the shared caps, N the live nodes now: a node that joins
        takes its part from the others, a lost node's part goes back to the survivors."""
        live = [n for n in self._nodes.values() if n.alive]
        if not live:
            return
        wanted = {n.id: NodeShare(index=i, count=len(live)) for i, n in enumerate(live)}
        changed = [n for n in live if n.share != wanted[n.id]]
        self._share_count = len(live)
        if not changed:
            return
        results = await asyncio.gather(
            *(
                asyncio.wait_for(self._ask(n.actor, "reshare", wanted[n.id]), self._node_timeout_s)
                for n in changed
            ),
            return_exceptions=True,
        )
        for node, result in zip(changed, results, strict=True):
            if isinstance(result, BaseException):
                logger.warning("resharing %s %s failed: %s", self.kind, node.id, result)  # retried next check
            else:
                node.share = wanted[node.id]

    def _lose(self, node: PlacedNode, why: str) -> None:
        if node.lost.done():
            return
        logger.warning(
            "%s %s lost (%s); %d jobs there will run again elsewhere", self.kind, node.id, why, len(node.jobs)
        )
        node.healthy = False
        node.lost.set_result(why)
        self._kill(node.actor)
        self._notify()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    # -- placement --------------------------------------------------------------------------
    def _pick(self) -> PlacedNode | None:
        usable = [n for n in self._nodes.values() if n.alive and n.healthy and n.free > 0]
        return max(usable, key=lambda n: (n.free, -n.placed_total), default=None)

    def _nodeless_for(self) -> float:
        """How long the executor has had no live node (0 while it has one)."""
        if any(n.alive for n in self._nodes.values()):
            self._nodeless_since = None
            return 0.0
        now = time.monotonic()
        if self._nodeless_since is None:
            self._nodeless_since = now
        return now - self._nodeless_since

    def _given_up(self) -> str | None:
        """Why no job can be placed any more, if so (INIT then fails as infrastructure)."""
        if self._closed:
            return f"the {self.kind} executor is closed"
        if self._nodeless_for() >= self._no_node_timeout_s:
            return f"no live {self.kind} for {self._no_node_timeout_s:g}s"
        return None

    async def wait_for_capacity(self) -> None:
        """Return once some healthy node has a free slot, or once no job can be placed any more
        (closed, or no live node for `no_node_timeout_s`: INIT then fails). Until then, with
        every node gone, jobs wait here for nodes to join."""
        while self._pick() is None and self._given_up() is None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), self._health_interval_s)

    def node_of(self, state: Any) -> str | None:
        return state.node if isinstance(state, RayJobHandle) else None

    def nodes(self) -> list[NodeStatus]:
        return [n.status() for n in self._nodes.values()]

    def actor_pids(self) -> list[int]:
        return [n.pid for n in self._nodes.values() if n.pid is not None]

    # -- stages -----------------------------------------------------------------------------
    async def _stream_stage(self, actor: Any, method: str, *args: Any) -> Any:
        """A stage on its node, as the stream of events it sends (`RolloutNode._stage`): each
        model-slot wait there is told to this context's listeners (the stage runner's budget
        clock), and the stage's result is returned. A wait still open when the stream ends
        (the node lost, the call cancelled) is closed here, so no clock stays stopped."""
        open_waits = 0
        try:
            async for kind, value in self._stream(actor, method, *args):
                if kind == "result":
                    return value
                if value or open_waits:
                    open_waits += 1 if value else -1
                    tell_slot_wait(bool(value))
        finally:
            for _ in range(open_waits):
                tell_slot_wait(False)
        raise InfrastructureError("the node's stage ended without a result")

    async def _call(self, node: PlacedNode, job: Job, method: str, *args: Any) -> Any:
        """One stage call that fails with InfrastructureError when the node is lost, and aborts
        the job's stage on the node when cancelled."""
        if not node.alive:
            raise InfrastructureError(f"{self.kind} {node.id} was lost: {node.lost.result()}", node.id)
        call = asyncio.ensure_future(self._stream_stage(node.actor, method, *args))
        try:
            await asyncio.wait({call, node.lost}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            call.cancel()
            await asyncio.shield(self._abort(node, job))
            raise
        if not call.done():
            call.cancel()
            node.lost_jobs_total += 1
            raise InfrastructureError(f"{self.kind} {node.id} was lost: {node.lost.result()}", node.id)
        try:
            return call.result()
        except self._lost_errors as exc:
            node.lost_jobs_total += 1
            # Its node is gone for good (never restarted): no job may be placed there again,
            # even before the next health check notices.
            self._lose(node, f"its rollout node died: {type(exc).__name__}")
            raise InfrastructureError(
                f"{self.kind} {node.id} was lost: {type(exc).__name__}", node.id
            ) from exc
        except Exception as exc:
            cause = self._unwrap(exc)
            if cause is not exc:
                raise cause from None
            raise

    async def _abort(self, node: PlacedNode, job: Job) -> None:
        if not node.alive:
            return
        try:
            await asyncio.wait_for(self._ask(node.actor, "abort", job.id), self._node_timeout_s)
        except Exception as exc:
            logger.warning("aborting job %s on %s %s failed: %s", job.id, self.kind, node.id, exc)

    async def init(self, handler: RolloutHandler, job: Job) -> RayJobHandle:
        node = self._pick()
        while node is None:  # another job took the last slot since wait_for_capacity returned
            why = self._given_up()
            if why is not None:
                raise InfrastructureError(why)
            await self.wait_for_capacity()
            node = self._pick()
        node.jobs.add(job.id)
        node.placed_total += 1
        try:
            await self._call(node, job, "init", job)
        except BaseException:
            self._free(node, job.id)
            raise
        return RayJobHandle(node=node.id, job_id=job.id, task=job.task)

    def _node(self, handle: RayJobHandle) -> PlacedNode:
        node = self._nodes.get(handle.node)
        if node is None:
            raise InfrastructureError(f"{self.kind} {handle.node} is unknown (executor closed?)", handle.node)
        return node

    async def run(self, handler: RolloutHandler, job: Job, state: RayJobHandle) -> Trajectory:
        return await self._call(self._node(state), job, "run", job)

    async def evaluate(
        self, handler: RolloutHandler, job: Job, state: RayJobHandle | None, trajectory: Trajectory
    ) -> Evaluation:
        if state is not None:
            return await self._call(self._node(state), job, "evaluate", job, True, trajectory)
        # No RUN state needed: any healthy node may score it (the evaluator opens what it needs).
        node = self._pick() or next((n for n in self._nodes.values() if n.alive and n.healthy), None)
        if node is None:
            raise InfrastructureError(f"no healthy {self.kind} to evaluate on")
        return await self._call(node, job, "evaluate", job, False, trajectory)

    async def release(self, handler: RolloutHandler, state: RayJobHandle) -> None:
        node = self._nodes.get(state.node)
        if node is None:
            return
        try:
            if node.alive:
                await asyncio.wait_for(self._ask(node.actor, "release", state.job_id), self._node_timeout_s)
        except self._lost_errors:
            pass  # the node took the state with it
        finally:
            self._free(node, state.job_id)

    def _free(self, node: PlacedNode, job_id: str) -> None:
        node.jobs.discard(job_id)
        self._notify()

    # -- LLM backends -----------------------------------------------------------------------
    async def broadcast_backends(self, method: str, *args: Any, **kwargs: Any) -> None:
        """Apply a backend change (`add`, `remove`, `drain`, `publish_policy`) on every live
        node's pool, and remember it for the nodes that join later."""
        self._changes.record(method, args, kwargs)
        live = [n for n in self._nodes.values() if n.alive]
        results = await asyncio.gather(
            *(
                asyncio.wait_for(
                    self._ask(n.actor, "backends_call", method, args, kwargs), self._node_timeout_s
                )
                for n in live
            ),
            return_exceptions=True,
        )
        for node, result in zip(live, results, strict=True):
            if isinstance(result, BaseException):
                logger.warning("backend %s on %s %s failed: %s", method, self.kind, node.id, result)
