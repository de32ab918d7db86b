# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Stages on a Ray cluster: one long-lived rollout actor per node, jobs pinned to their node.

Placement, health, loss and shares are `node_executor.NodeExecutor`'s; this module is how Ray
hosts the nodes:

- One `RolloutNode` actor (`ray_node`) per eligible node, pinned there with a hard
  node-affinity strategy (`num_cpus=0`: it never takes CPUs a trainer's placement groups want).
- A node is eligible when Ray reports it alive and it carries the configured labels and
  resource; nodes that join later get an actor at the next health check.
- A stage streams back as Ray's streaming generator; an actor that died is lost for good
  (never restarted), its jobs re-run elsewhere.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

from nemo_gym_prorl.pipeline.node_executor import NodeExecutor
from nemo_gym_prorl.pipeline.ray_config import RayExecutorConfig
from nemo_gym_prorl.pipeline.ray_node import (
    NodeBuilder,
    NodeShare,
    RolloutNode,
    StageEvent,
)
from nemo_gym_prorl.pipeline.ray_node import NodeRuntime as NodeRuntime  # re-exported for builders
from nemo_gym_prorl.pipeline.ray_start import eligible_nodes, init_ray, node_lost_errors, resolve_address

logger = logging.getLogger(__name__)

__all__ = ["NodeBuilder", "NodeRuntime", "NodeShare", "RayExecutor", "RayExecutorConfig"]


class RayExecutor(NodeExecutor):
    """A `StageExecutor` over one `RolloutNode` actor per eligible Ray node."""

    kind = "Ray node"

    def __init__(
        self, config: RayExecutorConfig, build: NodeBuilder, *, gym_head_address: str | None = None
    ) -> None:
        super().__init__(
            build,
            slots_per_node=config.slots_per_node,
            max_attempts=config.max_attempts,
            health_interval_s=config.health_interval_s,
            node_timeout_s=config.node_timeout_s,
            start_timeout_s=config.start_timeout_s,
            no_node_timeout_s=config.no_node_timeout_s,
        )
        self.config = config
        self._address = resolve_address(config.address, gym_head_address)
        self._started_ray = False
        self._actor_cls: Any = None

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
        await self._start_nodes()

    def _where(self) -> str:
        return (
            f"address={self._address or 'local'}, labels={self.config.node_labels}, "
            f"resource={self.config.resource}; is the cluster up?"
        )

    async def _find(self) -> list[dict[str, Any]]:
        return await asyncio.to_thread(eligible_nodes, self.config.node_labels, self.config.resource)

    def _place(self, node: dict[str, Any], share: NodeShare) -> Any:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        return self._actor_cls.options(
            namespace=self.config.namespace,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=False),
        ).remote(self._build, share)

    async def _ask(self, actor: Any, method: str, *args: Any) -> Any:
        return await getattr(actor, method).remote(*args)

    async def _stream(self, actor: Any, method: str, *args: Any) -> AsyncIterator[StageEvent]:
        async for ref in getattr(actor, method).options(num_returns="streaming").remote(*args):
            yield await ref

    def _kill(self, actor: Any) -> None:
        import ray

        with contextlib.suppress(Exception):
            ray.kill(actor, no_restart=True)

    def _unwrap(self, exc: Exception) -> Exception:
        cause = getattr(exc, "cause", None)  # RayTaskError: the handler's own exception
        return cause if isinstance(cause, Exception) else exc

    async def _after_close(self) -> None:
        if self._started_ray:
            import ray

            await asyncio.to_thread(ray.shutdown)
