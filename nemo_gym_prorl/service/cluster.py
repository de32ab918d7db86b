# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The service's executor: in this process, or on every node of a Ray cluster.

With `executor.kind=ray`, every node's rollout actor builds its handlers from the same validated
`ServeConfig` as the service (`build_node_runtime`), with its own LLM pool over the same backends
and its share of each backend's in-flight cap, so the cluster as a whole never sends a backend
more than the configured cap. Backend changes made through the API (`/v1/backends`,
`/add_llm_server`) are applied on the service's pool and then on every node's
(`ClusterBackendRegistry`).
"""

from __future__ import annotations

import functools
from typing import Any

from nemo_gym_prorl.pipeline.executor import StageExecutor
from nemo_gym_prorl.pipeline.ray_executor import NodeRuntime, NodeShare, RayExecutor, make_executor
from nemo_gym_prorl.service.backends import BackendInfo, BackendRegistry, PoolBackendRegistry
from nemo_gym_prorl.service.config import ServeConfig, validate_config


class SharedBackends:
    """A node's backend registry: per-backend caps given through the API become this node's share."""

    def __init__(self, registry: PoolBackendRegistry, share: NodeShare) -> None:
        self.registry = registry
        self.share = share

    async def add(self, url: str, **opts: Any) -> BackendInfo:
        cap = opts.get("max_in_flight")
        if isinstance(cap, int) and cap >= 1:
            opts = {**opts, "max_in_flight": self.share.of(cap)}
        return await self.registry.add(url, **opts)

    async def remove(self, url: str) -> bool:
        return await self.registry.remove(url)

    async def drain(self, url: str) -> BackendInfo:
        return await self.registry.drain(url)


def node_config(config: ServeConfig, share: NodeShare) -> ServeConfig:
    """The service config as one node runs it: its share of each backend's in-flight cap."""
    llm = config.llm.model_copy(deep=True)
    llm.balancer.max_in_flight = share.of(llm.balancer.max_in_flight)
    return config.model_copy(update={"llm": llm})


async def build_node_runtime(config_data: dict[str, Any], share: NodeShare) -> NodeRuntime:
    """Runs on a node's rollout actor: the same handlers `prorl serve` builds, over this node's
    LLM pool share. Takes the config as plain data (validated again here) so the actor needs
    nothing but this package installed."""
    from nemo_gym_prorl.llm.access import LLMAccess
    from nemo_gym_prorl.service.task_handlers import build_handlers

    config = node_config(validate_config(config_data), share)
    llm = LLMAccess.from_config(config.llm)
    backends = PoolBackendRegistry(llm.pool)
    try:
        handlers = build_handlers(config, llm, backends)
        await llm.pool.start()
    except BaseException:
        await backends.aclose()
        raise
    return NodeRuntime(handlers=handlers, backends=SharedBackends(backends, share), close=backends.aclose)


async def build_executor(config: ServeConfig, *, gym_head_address: str | None = None) -> StageExecutor:
    """The configured executor, started; for Ray, one actor per node built from `config`."""
    build = functools.partial(build_node_runtime, config.model_dump(mode="json"))
    return await make_executor(config.executor, build, gym_head_address=gym_head_address)


class ClusterBackendRegistry:
    """The service's backend registry, with every change applied on each node's pool too.

    Health, listing and admission come from the service's own pool (it probes the same URLs);
    the nodes' pools do the balancing of their rollouts.
    """

    def __init__(self, local: BackendRegistry, executor: RayExecutor) -> None:
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

    async def list(self) -> list[BackendInfo]:
        return await self.local.list()

    async def aclose(self) -> None:
        await self.local.aclose()


def with_cluster_backends(backends: BackendRegistry, executor: StageExecutor) -> BackendRegistry:
    """Backend changes reach every node when stages run on Ray; otherwise unchanged."""
    if isinstance(executor, RayExecutor):
        return ClusterBackendRegistry(backends, executor)
    return backends
