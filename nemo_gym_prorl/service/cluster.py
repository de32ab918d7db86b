# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The service's backends when its stages run on every node of a Ray cluster.

With `executor.kind=ray` (or `processes`), every node's rollout actor (or worker) builds its handlers with the same factory
as the service (`service.stack.build_node`, whoever configured the stack), with its own LLM pool
over the same backends and its share of each backend's in-flight cap, so the cluster as a whole never sends a backend more than the configured
cap; the shares are recomputed whenever nodes join or are lost. Backend changes made through the
API (`/v1/backends`, `/add_llm_server`) are applied on the service's pool and then on every
node's (`ClusterBackendRegistry`).
"""

from __future__ import annotations

from typing import Any

from nemo_gym_prorl.llm.access import LLMConfig
from nemo_gym_prorl.llm.policy import PolicyStatus, PublishReport, PublishRequest
from nemo_gym_prorl.pipeline.executor import StageExecutor
from nemo_gym_prorl.pipeline.node_executor import NodeExecutor
from nemo_gym_prorl.pipeline.ray_node import NodeShare
from nemo_gym_prorl.service.backends import BackendInfo, BackendRegistry, PoolBackendRegistry


class SharedBackends:
    """A node's backend registry: it holds the cluster-wide in-flight cap of every backend and
    gives this node's pool its share of each; when nodes join or leave, `reshare` resizes them."""

    def __init__(self, registry: PoolBackendRegistry, share: NodeShare, default_cap: int) -> None:
        self.registry = registry
        self.share = share
        self.default_cap = default_cap  # the configured per-backend cap, for the whole cluster
        self.caps: dict[str, int] = {}  # backends added with their own cap: url -> cluster-wide cap

    async def add(self, url: str, **opts: Any) -> BackendInfo:
        cap = opts.get("max_in_flight")
        if isinstance(cap, int) and cap >= 1:
            opts = {**opts, "max_in_flight": self.share.of(cap)}
        info = await self.registry.add(url, **opts)
        if isinstance(cap, int) and cap >= 1:
            self.caps[info.url] = cap
        return info

    async def remove(self, url: str) -> bool:
        return await self.registry.remove(url)

    async def drain(self, url: str) -> BackendInfo:
        return await self.registry.drain(url)

    async def publish_policy(self, request: PublishRequest) -> PublishReport:
        return await self.registry.publish_policy(request)

    def reshare(self, share: NodeShare) -> None:
        """Take `share` of every backend's cluster-wide cap from now on."""
        self.share = share
        balancer = self.registry.pool.balancer
        for address in balancer.addresses():
            balancer.set_cap(address, share.of(self.caps.get(address, self.default_cap)))


def node_llm_config(llm: LLMConfig, share: NodeShare) -> LLMConfig:
    """The LLM settings as one node runs them: its share of each backend's in-flight cap."""
    node = llm.model_copy(deep=True)
    node.balancer.max_in_flight = share.of(llm.balancer.max_in_flight)
    return node


class ClusterBackendRegistry:
    """The service's backend registry, with every change applied on each node's pool too.

    Health, listing and admission come from the service's own pool (it probes the same URLs);
    the nodes' pools do the balancing of their rollouts.
    """

    def __init__(self, local: BackendRegistry, executor: NodeExecutor) -> None:
        self.local = local
        self.executor = executor

    async def add(self, url: str, **opts: Any) -> BackendInfo:
        info = await self.local.add(url, **opts)  # validates: a bad URL never reaches the nodes
        await self.executor.broadcast_backends("add", info.url, **opts)
        return info

    async def remove(self, url: str) -> bool:
        known = await self.local.remove(url)
        await self.executor.broadcast_backends("remove", url)
        return known

    async def drain(self, url: str) -> BackendInfo:
        info = await self.local.drain(url)
        await self.executor.broadcast_backends("drain", url)
        return info

    async def publish_policy(self, request: PublishRequest) -> PublishReport:
        """The service's pool first (a bad adapter is refused before any node sees it), then
        every node's pool, whose rollouts do the generating."""
        report = await self.local.publish_policy(request)
        await self.executor.broadcast_backends("publish_policy", request)
        return report

    def policy_status(self) -> PolicyStatus:
        return self.local.policy_status()

    async def list(self) -> list[BackendInfo]:
        return await self.local.list()

    async def aclose(self) -> None:
        await self.local.aclose()


def with_cluster_backends(backends: BackendRegistry, executor: StageExecutor) -> BackendRegistry:
    """Backend changes reach every node when stages run on rollout nodes (Ray actors, worker
    processes); otherwise unchanged."""
    if isinstance(executor, NodeExecutor):
        return ClusterBackendRegistry(backends, executor)
    return backends
