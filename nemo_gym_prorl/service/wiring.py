# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""From a validated `ServeConfig` to a running service: handlers, backends, pipeline, app.

Task handlers are named by import targets (`module:factory`), so task kinds plug in through
configuration, not code changes here; they all share the service's one LLM backend pool.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from fastapi import FastAPI

from nemo_gym_prorl.llm.access import LLMAccess, LLMConfig
from nemo_gym_prorl.pipeline import Pipeline, PipelineConfig
from nemo_gym_prorl.pipeline.executor import StageExecutor
from nemo_gym_prorl.service.app import create_app
from nemo_gym_prorl.service.backends import PoolBackendRegistry
from nemo_gym_prorl.service.batch_manager import DatasetCatalog
from nemo_gym_prorl.service.cluster import build_executor, with_cluster_backends
from nemo_gym_prorl.service.config import ServeConfig
from nemo_gym_prorl.service.core import RolloutService, ServiceOptions
from nemo_gym_prorl.service.task_handlers import HandlersFactory, build_handlers

logger = logging.getLogger(__name__)


@dataclass
class RolloutStack:
    """Everything behind a rollout API: the LLM access (its pool), the backend registry over
    that pool, the pipeline over the handlers, and the service. Nothing is started yet:
    `await stack.start()` inside the serving event loop (the pool's HTTP client binds to it)."""

    llm: LLMAccess
    backends: PoolBackendRegistry
    pipeline: Pipeline
    service: RolloutService

    def place_on(self, executor: StageExecutor) -> None:
        """Run the stages on `executor` (before `start`); on Ray, backend changes made through
        the API then reach every node's pool too."""
        self.pipeline.executor = executor
        self.service.backends = with_cluster_backends(self.backends, executor)

    async def start(self) -> None:
        await self.llm.pool.start()  # probes the configured backends; starts the health check
        await self.service.start()


def build_rollout_stack(
    llm: LLMConfig, pipeline: PipelineConfig, options: ServiceOptions, handlers: HandlersFactory
) -> RolloutStack:
    """The one builder of pool, access, registry, pipeline and service, for `prorl serve`, the
    NeMo Gym agent and the benchmarks alike; `handlers` registers the task handlers, which all
    share the one LLM pool. Stages run in this process until `place_on` says otherwise."""
    access = LLMAccess.from_config(llm)
    backends = PoolBackendRegistry(access.pool)
    engine = Pipeline(handlers(access, backends), pipeline)
    return RolloutStack(access, backends, engine, RolloutService(engine, backends, options))


async def build_service(config: ServeConfig) -> RolloutService:
    """`prorl serve`'s service, its LLM pool started; stages on Ray when `executor.kind=ray`."""
    executor = await build_executor(config)
    try:
        stack = build_rollout_stack(
            config.llm,
            config.pipeline,
            config.service,
            lambda llm, backends: build_handlers(config, llm, backends),
        )
    except BaseException:
        await executor.close()
        raise
    stack.place_on(executor)
    await stack.llm.pool.start()  # probes the configured backends; starts the periodic health check
    return stack.service


def build_app(config: ServeConfig, service: RolloutService) -> FastAPI:
    datasets = DatasetCatalog({**DatasetCatalog.from_env().paths(), **config.datasets})
    return create_app(service, token=config.auth.resolved_token(), datasets=datasets)
