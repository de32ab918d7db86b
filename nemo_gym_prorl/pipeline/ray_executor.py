# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Stages on a Ray cluster: one long-lived rollout actor per node, jobs pinned to their node.

The pipeline keeps the schedule (queues, priorities, budgets, cancellation, DAPO); this executor
only decides where a stage runs:

- One `RolloutNode` actor (`ray_node`) per eligible node, pinned there with a hard
  node-affinity strategy (`num_cpus=0`: it never takes CPUs a trainer's placement groups want).
- INIT goes to the healthy node with the most free slots; RUN, EVAL and release of that job go
  to the same node (the state the pipeline holds is a small `RayJobHandle`). A slot is a job
  with live state on the node; waiting for one is `wait_for_capacity`, which the pipeline
  counts as queue time.
- Cancelling a stage aborts it on the actor (its task is cancelled and the job's sandbox
  released there) before the cancellation goes on.
- A node that dies, or stops answering health checks for `node_timeout_s`, is lost: its
  stages fail with `InfrastructureError` (the pipeline re-runs those jobs elsewhere) and it
  gets no new work. Nodes that join later get an actor at the next health check.
- Shared caps (each LLM backend's in-flight limit) are split over the live nodes, and split
  again whenever one joins or is lost (`NodeShare`, `RolloutNode.reshare`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

from nemo_gym_prorl.llm.slot_wait import tell_slot_wait
from nemo_gym_prorl.pipeline.backend_changes import BackendChanges
from nemo_gym_prorl.pipeline.executor import (
    InfrastructureError,
    NodeStatus,
)
from nemo_gym_prorl.pipeline.handler import RolloutHandler
from nemo_gym_prorl.pipeline.job import Evaluation, Job, Trajectory
from nemo_gym_prorl.pipeline.ray_config import RayExecutorConfig
from nemo_gym_prorl.pipeline.ray_node import (
    NodeBuilder,
    NodeShare,
    PlacedNode,
    RayJobHandle,
    RolloutNode,
)
from nemo_gym_prorl.pipeline.ray_node import NodeRuntime as NodeRuntime  # re-exported for builders
from nemo_gym_prorl.pipeline.ray_start import eligible_nodes, init_ray, node_lost_errors, resolve_address

logger = logging.getLogger(__name__)


class RayExecutor:
    """A `StageExecutor` over one `RolloutNode` actor per eligible Ray node."""

    def __init__(
        self, config: RayExecutorConfig, build: NodeBuilder, *, gym_head_address: str | None = None
    ) -> None:
        self.config = config
        self.max_attempts = config.max_attempts
        self._build = build
        self._address = resolve_address(config.address, gym_head_address)
        self._nodes: dict[str, PlacedNode] = {}
        self._changed = asyncio.Event()
        self._health: asyncio.Task[None] | None = None
        self._started_ray = False
        self._actor_cls: Any = None
        self._lost_errors: tuple[type[BaseException], ...] = ()
        self._share_count = 1
        self._closed = False
        self._nodeless_since: float | None = None
        self._changes = BackendChanges()

    # -- lifecycle --------------------------------------------------------------------------
    async def start(self) -> None:
        import ray

        if not ray.is_initialized():
            # With no address this is a local Ray of our own, on loopback only (`ray_start`).
            await asyncio.to_thread(
                init_ray,
                self._address,
                namespace=self.config.namespace,
                include_dashboard=False,
                log_to_driver=False,
            )
            self._started_ray = True
        self._lost_errors = node_lost_errors()
        self._actor_cls = ray.remote(num_cpus=0, max_concurrency=max(1000, 4 * self.config.slots_per_node))(
            RolloutNode
        )
        eligible = await asyncio.to_thread(self._eligible_nodes)
        self._share_count = max(1, len(eligible))
        deadline = time.monotonic() + self.config.start_timeout_s
        await self._add_nodes(eligible)
        while not self._nodes:
            if time.monotonic() > deadline:
                await self.close()
                raise RuntimeError(
                    f"no Ray node could host a rollout actor within {self.config.start_timeout_s}s "
                    f"(address={self._address or 'local'}, labels={self.config.node_labels}, "
                    f"resource={self.config.resource}); is the cluster up?"
                )
            await asyncio.sleep(min(1.0, self.config.health_interval_s))
            await self._add_nodes(await asyncio.to_thread(self._eligible_nodes))
        await self._reshare()
        self._health = asyncio.create_task(self._watch(), name="ray-executor-health")

    def _eligible_nodes(self) -> list[dict[str, Any]]:
        return eligible_nodes(self.config.node_labels, self.config.resource)

    async def _add_nodes(self, found: list[dict[str, Any]]) -> None:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        fresh = [n for n in found if n["NodeID"] not in self._nodes]
        if not fresh:
            return
        # Start with the share they will hold once ready; `_reshare` settles everyone's.
        count = max(self._share_count, sum(n.alive for n in self._nodes.values()) + len(fresh))
        started = []
        for i, node in enumerate(fresh):
            share = NodeShare(index=len(self._nodes) + i, count=count)
            actor = self._actor_cls.options(
                namespace=self.config.namespace,
                scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=False),
            ).remote(self._build, share)
            started.append((node, actor, share, self._await(actor.ready.remote())))
        for node, actor, share, ready in started:
            try:
                info = await asyncio.wait_for(ready, self.config.start_timeout_s)
            except Exception as exc:  # the node vanished or its runtime could not be built
                logger.warning("no rollout actor on node %s: %s", node["NodeID"], exc)
                self._kill(actor)
                continue
            assert info["node"] == node["NodeID"], "node affinity was not honoured"
            try:  # the backends and policy the other nodes serve, before it takes any job
                for method, args, kwargs in self._changes.replay():
                    await asyncio.wait_for(
                        self._await(actor.backends_call.remote(method, args, kwargs)),
                        self.config.node_timeout_s,
                    )
            except Exception as exc:
                logger.warning(
                    "node %s could not take the service's backend changes: %s", node["NodeID"], exc
                )
                self._kill(actor)
                continue
            self._nodes[node["NodeID"]] = PlacedNode(
                id=node["NodeID"],
                address=node.get("NodeManagerAddress"),
                actor=actor,
                slots=self.config.slots_per_node,
                pid=info.get("pid"),
                share=share,
            )
            logger.info("rollout actor ready on node %s (%s)", node["NodeID"], node.get("NodeManagerAddress"))
        self._notify()

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._health is not None:
            self._health.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._health
        # Each actor releases what it still holds (sandboxes close), then goes.
        live = [n for n in self._nodes.values() if n.alive]
        await asyncio.gather(
            *(
                asyncio.wait_for(self._await(n.actor.close.remote()), self.config.node_timeout_s)
                for n in live
            ),
            return_exceptions=True,
        )
        for node in self._nodes.values():
            self._kill(node.actor)
            if not node.lost.done():
                node.lost.set_result("executor closed")
        self._nodes.clear()
        self._notify()
        if self._started_ray:
            import ray

            await asyncio.to_thread(ray.shutdown)

    @staticmethod
    def _kill(actor: Any) -> None:
        import ray

        with contextlib.suppress(Exception):
            ray.kill(actor, no_restart=True)

    # -- health -----------------------------------------------------------------------------
    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(self.config.health_interval_s)
            try:
                await self.check_nodes()
            except Exception:
                logger.warning("node health check failed", exc_info=True)

    async def check_nodes(self) -> None:
        """Mark dead or silent nodes lost, find new ones; the health loop calls it."""
        found = await asyncio.to_thread(self._eligible_nodes)
        alive_ids = {n["NodeID"] for n in found}
        now = time.monotonic()
        # A busy node may answer slowly; only a third of the loss timeout without an answer
        # makes it unhealthy (no new work), the whole timeout makes it lost.
        patience = max(self.config.health_interval_s, self.config.node_timeout_s / 3)
        pings = {
            node.id: asyncio.ensure_future(asyncio.wait_for(self._await(node.actor.ping.remote()), patience))
            for node in self._nodes.values()
            if node.alive and node.id in alive_ids
        }
        if pings:
            await asyncio.wait(pings.values())
        for node in list(self._nodes.values()):
            if not node.alive:
                continue
            if node.id not in alive_ids:
                self._lose(node, "Ray reports the node dead (or no longer eligible)")
                continue
            ping = pings[node.id]
            if ping.exception() is None:
                node.last_seen, node.healthy = now, True
            elif isinstance(ping.exception(), self._lost_errors):
                self._lose(node, f"its rollout actor died: {ping.exception()}")
            else:
                node.healthy = False  # silent: no new work; lost if it stays silent
                if now - node.last_seen > self.config.node_timeout_s:
                    self._lose(node, f"silent for {now - node.last_seen:.1f}s")
        await self._add_nodes([n for n in found if n["NodeID"] not in self._nodes])
        await self._reshare()
        self._notify()

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
                asyncio.wait_for(
                    self._await(n.actor.reshare.remote(wanted[n.id])), self.config.node_timeout_s
                )
                for n in changed
            ),
            return_exceptions=True,
        )
        for node, result in zip(changed, results, strict=True):
            if isinstance(result, BaseException):
                logger.warning("resharing node %s failed: %s", node.id, result)  # retried next check
            else:
                node.share = wanted[node.id]

    def _lose(self, node: PlacedNode, why: str) -> None:
        if node.lost.done():
            return
        logger.warning(
            "node %s lost (%s); %d jobs there will run again elsewhere", node.id, why, len(node.jobs)
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
            return "the Ray executor is closed"
        if self._nodeless_for() >= self.config.no_node_timeout_s:
            return f"no live Ray node for {self.config.no_node_timeout_s:g}s (is the cluster up?)"
        return None

    async def wait_for_capacity(self) -> None:
        """Return once some healthy node has a free slot, or once no job can be placed any more
        (closed, or no live node for `no_node_timeout_s`: INIT then fails). Until then, with
        every node gone, jobs wait here for nodes to join."""
        while self._pick() is None and self._given_up() is None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), self.config.health_interval_s)

    def node_of(self, state: Any) -> str | None:
        return state.node if isinstance(state, RayJobHandle) else None

    def nodes(self) -> list[NodeStatus]:
        return [n.status() for n in self._nodes.values()]

    def actor_pids(self) -> list[int]:
        return [n.pid for n in self._nodes.values() if n.pid is not None]

    # -- stages -----------------------------------------------------------------------------
    @staticmethod
    async def _await(ref: Any) -> Any:
        return await ref

    async def _stream_stage(self, method: Any, *args: Any) -> Any:
        """A stage on its node, as the stream of events it sends (`RolloutNode._stage`): each
        model-slot wait there is told to this context's listeners (the stage runner's budget
        clock), and the stage's result is returned. A wait still open when the stream ends
        (the node lost, the call cancelled) is closed here, so no clock stays stopped."""
        open_waits = 0
        try:
            async for ref in method.options(num_returns="streaming").remote(*args):
                kind, value = await self._await(ref)
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
        """One actor call that fails with InfrastructureError when the node is lost, and aborts
        the job's stage on the node when cancelled."""
        if not node.alive:
            raise InfrastructureError(f"node {node.id} was lost: {node.lost.result()}", node.id)
        call = asyncio.ensure_future(self._stream_stage(getattr(node.actor, method), *args))
        try:
            await asyncio.wait({call, node.lost}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            call.cancel()
            await asyncio.shield(self._abort(node, job))
            raise
        if not call.done():
            call.cancel()
            node.lost_jobs_total += 1
            raise InfrastructureError(f"node {node.id} was lost: {node.lost.result()}", node.id)
        try:
            return call.result()
        except self._lost_errors as exc:
            node.lost_jobs_total += 1
            # Its actor is gone for good (never restarted): no job may be placed there again,
            # even before the next health check notices.
            self._lose(node, f"its rollout actor died: {type(exc).__name__}")
            raise InfrastructureError(f"node {node.id} was lost: {type(exc).__name__}", node.id) from exc
        except Exception as exc:
            cause = getattr(exc, "cause", None)  # RayTaskError: the handler's own exception
            if isinstance(cause, Exception):
                raise cause from None
            raise

    async def _abort(self, node: PlacedNode, job: Job) -> None:
        if not node.alive:
            return
        try:
            await asyncio.wait_for(self._await(node.actor.abort.remote(job.id)), self.config.node_timeout_s)
        except Exception as exc:
            logger.warning("aborting job %s on node %s failed: %s", job.id, node.id, exc)

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
            raise InfrastructureError(f"node {handle.node} is unknown (executor closed?)", handle.node)
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
            raise InfrastructureError("no healthy node to evaluate on")
        return await self._call(node, job, "evaluate", job, False, trajectory)

    async def release(self, handler: RolloutHandler, state: RayJobHandle) -> None:
        node = self._nodes.get(state.node)
        if node is None:
            return
        try:
            if node.alive:
                await asyncio.wait_for(
                    self._await(node.actor.release.remote(state.job_id)),
                    self.config.node_timeout_s,
                )
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
                    self._await(n.actor.backends_call.remote(method, args, kwargs)),
                    self.config.node_timeout_s,
                )
                for n in live
            ),
            return_exceptions=True,
        )
        for node, result in zip(live, results, strict=True):
            if isinstance(result, BaseException):
                logger.warning("backend %s on node %s failed: %s", method, node.id, result)
