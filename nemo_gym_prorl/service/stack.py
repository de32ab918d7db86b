# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The rollout stack: what a rollout service is, whichever door it is reached through.

    build_stack(StackConfig, handlers) -> RolloutStack
        .llm / .backends   the LLM access and its backend pool, shared by every handler
        .pipeline          INIT -> RUN -> EVAL over the task handlers `handlers` registers
        .service           admission, validation at submit, blocking and streamed results
        await start()      executor (in process, or one actor per Ray node), pool, pipeline
        await close()      every rollout released, executor and pool closed
        router()           the rollout HTTP API, one `APIRouter` any FastAPI app includes
        app()              a FastAPI app of that router alone (`prorl serve`)

`prorl serve` (`stack_from_config`), the NeMo Gym agent (which mounts `router()` and adds its
`/run`) and the tests all build it here; a Ray node builds its own handlers through `build_node`
from the same picklable `handlers` factory, over its share of the backends' caps. Another
integration (a trainer in the same process) needs two lines:

    stack = build_stack(StackConfig(llm=...), my_handlers); await stack.start()
    result = await stack.service.process(JobSpec(instance=row), timeout_s=None)
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any

from fastapi import APIRouter, FastAPI
from pydantic import BaseModel, ConfigDict, Field

from nemo_gym_prorl.llm.access import LLMAccess, LLMConfig
from nemo_gym_prorl.pipeline import HandlerRegistry, Pipeline, PipelineConfig
from nemo_gym_prorl.pipeline.executors import ExecutorConfig, make_executor
from nemo_gym_prorl.pipeline.policy_clock import PolicyClock
from nemo_gym_prorl.pipeline.ray_executor import NodeBuilder, NodeRuntime, NodeShare
from nemo_gym_prorl.sandbox.base import default_sandbox_root
from nemo_gym_prorl.service.app import create_app, rollout_router
from nemo_gym_prorl.service.backends import BackendRegistry, PoolBackendRegistry
from nemo_gym_prorl.service.batch_manager import DatasetCatalog
from nemo_gym_prorl.service.cluster import SharedBackends, node_llm_config, with_cluster_backends
from nemo_gym_prorl.service.config import ServeConfig, validate_config
from nemo_gym_prorl.service.core import RolloutService, ServiceOptions
from nemo_gym_prorl.service.recovery import Durability, Recovered, recover
from nemo_gym_prorl.service.task_handlers import HandlersFactory, build_handlers


class StackConfig(BaseModel):
    """What a stack is made of, besides its task handlers."""

    model_config = ConfigDict(extra="forbid")

    llm: LLMConfig
    pipeline: PipelineConfig = Field(default_factory=PipelineConfig)
    executor: ExecutorConfig = Field(default_factory=ExecutorConfig)
    service: ServiceOptions = Field(default_factory=ServiceOptions)
    durability: Durability | None = Field(
        None, description="A journal that survives the process (`prorl serve` keeps one); none by default."
    )


class RolloutStack:
    """Everything behind a rollout API. Built by `build_stack`; nothing runs until `start()`,
    which must be awaited in the serving event loop (the pool's HTTP client binds to it)."""

    def __init__(
        self,
        config: StackConfig,
        handlers: HandlersFactory,
        *,
        gym_head_address: str | None = None,
    ) -> None:
        self.config = config
        self.handlers = handlers
        self.gym_head_address = gym_head_address  # where NeMo Gym's Ray cluster is, if any
        self.llm = LLMAccess.from_config(config.llm)
        self.backends = PoolBackendRegistry(self.llm.pool)
        self.pipeline = Pipeline(handlers(self.llm, self.backends), config.pipeline)
        # Staleness is judged against the version the backends were last given (or, for a
        # trainer that refits its own backends, the step its submissions carry).
        self.pipeline.policy_clock = PolicyClock(lambda: self.llm.pool.policy.version)
        self.service = RolloutService(self.pipeline, self.backends, config.service)
        self._router: APIRouter | None = None
        self._router_args: tuple[str | None, DatasetCatalog | None] = (None, None)
        self._lock = asyncio.Lock()
        self._started = False
        self.recovered: Recovered | None = None  # what start-up took back from the journal

    @property
    def started(self) -> bool:
        return self._started

    def node_builder(self) -> NodeBuilder | None:
        """What each Ray node's rollout actor runs to build its runtime (none in process)."""
        if self.config.executor.kind == "inprocess":
            return None
        return functools.partial(build_node, self.config.llm.model_dump(mode="json"), self.handlers)

    async def start(self) -> None:
        """Start the executor, probe the backends and start the pipeline; idempotent."""
        async with self._lock:
            if self._started:
                return
            executor = await make_executor(
                self.config.executor, self.node_builder(), gym_head_address=self.gym_head_address
            )
            # On Ray, backend changes made through the API reach every node's pool too.
            self.pipeline.executor = executor
            self.service.backends = with_cluster_backends(self.backends, executor)
            try:
                await self.llm.pool.start()  # probes the backends; starts the periodic health check
                await self.service.start()
                if self.config.durability is not None:
                    journal, self.recovered = await recover(self.pipeline, self.config.durability)
                    self.service.journal = journal
            except BaseException:
                await executor.close()
                raise
            self._started = True

    async def close(self) -> None:
        """Cancel every rollout (releasing its resources), close the executor and the pool."""
        await self.service.close()

    def router(self, *, token: str | None = None, datasets: DatasetCatalog | None = None) -> APIRouter:
        """The rollout API (native `/v1`, DAPO batches, ProRL-compatible, `/metrics`), made once:
        every app that mounts it serves these very routes. `/healthz` is left to the host app."""
        if self._router is None:
            self._router = rollout_router(self.service, token=token, datasets=datasets, health=False)
            self._router_args = (token, datasets)
        elif (token, datasets) != self._router_args:  # never serve it unguarded by mistake
            raise ValueError("the stack's router was already made with another token or datasets")
        return self._router

    def app(self, *, token: str | None = None, datasets: DatasetCatalog | None = None) -> FastAPI:
        """A FastAPI app serving the rollout API alone; its lifespan starts and closes the stack."""
        return create_app(self.service, token=token, datasets=datasets, lifecycle=(self.start, self.close))


def build_stack(
    config: StackConfig, handlers: HandlersFactory, *, gym_head_address: str | None = None
) -> RolloutStack:
    """The one builder of a rollout stack. `handlers` registers the task handlers over the LLM
    access given; with `executor.kind=ray` it must be picklable (each node calls it again)."""
    return RolloutStack(config, handlers, gym_head_address=gym_head_address)


def serve_handlers(config_data: dict[str, Any], llm: LLMAccess, backends: BackendRegistry) -> HandlerRegistry:
    """`prorl serve`'s task handlers, from its config as plain data (so a Ray node needs only
    this package installed to build them)."""
    return build_handlers(validate_config(config_data), llm, backends)


def stack_from_config(
    config: ServeConfig, *, gym_head_address: str | None = None, durability: Durability | None = None
) -> RolloutStack:
    """`prorl serve`'s stack: its config's LLM, pipeline, executor, service and tasks;
    `durability`: its journal (`serve_durability(config)`; `prorl serve` keeps one, a trainer's
    private service does not)."""
    stack_config = StackConfig(
        llm=config.llm,
        pipeline=config.pipeline,
        executor=config.executor,
        service=config.service,
        durability=durability,
    )
    handlers = functools.partial(serve_handlers, config.model_dump(mode="json"))
    return build_stack(stack_config, handlers, gym_head_address=gym_head_address)


def serve_durability(config: ServeConfig) -> Durability | None:
    """`prorl serve`'s journal (none when `journal.path` resolves to none) and its sandboxes' root."""
    path = config.journal.resolve(config.server.port)
    if path is None:
        return None
    return Durability(
        journal=path,
        keep_results=config.journal.keep_results,
        restore_max_bytes=config.journal.restore_max_bytes,
        sandbox_root=config.sandbox.root_dir or default_sandbox_root(),
        sandbox_backend=config.sandbox.backend,
    )


def serve_datasets(config: ServeConfig) -> DatasetCatalog:
    """The server-side datasets DAPO batches may name: the environment's, then the config's."""
    return DatasetCatalog({**DatasetCatalog.from_env().paths(), **config.datasets})


async def build_node(llm_data: dict[str, Any], handlers: HandlersFactory, share: NodeShare) -> NodeRuntime:
    """The one node builder: runs on every Ray node's rollout actor, whoever configured the
    stack. `handlers` over this node's own LLM pool, which takes the node's share of the caps."""
    llm_config = LLMConfig.model_validate(llm_data)
    llm = LLMAccess.from_config(node_llm_config(llm_config, share))
    backends = PoolBackendRegistry(llm.pool)
    try:
        registry = handlers(llm, backends)
        await llm.pool.start()
    except BaseException:
        await backends.aclose()
        raise
    shared = SharedBackends(backends, share, llm_config.balancer.max_in_flight)

    async def close() -> None:
        try:
            await registry.aclose()
        finally:
            await backends.aclose()

    return NodeRuntime(handlers=registry, backends=shared, close=close)
