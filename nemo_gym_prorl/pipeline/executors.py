# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Which `StageExecutor` runs the stages, chosen by name from `EXECUTORS` (`executor.kind`).

The built-ins are `inprocess` (this event loop), `processes` (worker processes of this machine,
each a rollout node with an event loop of its own) and `ray` (one rollout actor per node); a
rollout node builds its runtime with the `NodeBuilder` it is given. Another executor plugs in as
`EXECUTORS.register("mine", factory)`, or from configuration as an import target
(`executor.kind=mypkg.executors:make`); a factory takes the executor config, the node builder
(None in process) and NeMo Gym's Ray head address, and returns the executor, started. A kind
that names neither is refused when the config is read, with the known names.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from nemo_gym_prorl.pipeline.executor import InProcessExecutor, StageExecutor
from nemo_gym_prorl.pipeline.process_executor import ProcessExecutor, ProcessExecutorConfig
from nemo_gym_prorl.pipeline.ray_config import RayExecutorConfig
from nemo_gym_prorl.pipeline.ray_executor import NodeBuilder, RayExecutor
from nemo_gym_prorl.registry import Registry

EXECUTORS: Registry[Awaitable[StageExecutor]] = Registry("executor")
# A registered executor ("inprocess", "ray", or one registered before the config is read) or an
# import target `package.module:factory`.
ExecutorName = Annotated[str, AfterValidator(EXECUTORS.check)]


class ExecutorConfig(BaseModel):
    """Where stages run: `inprocess` (this process), `processes` (worker processes of this
    machine), `ray` (actors on the cluster's nodes), or an executor of one's own by registered
    name or import target."""

    model_config = ConfigDict(extra="forbid")

    kind: ExecutorName = "inprocess"
    processes: ProcessExecutorConfig = Field(default_factory=ProcessExecutorConfig)
    ray: RayExecutorConfig = Field(default_factory=RayExecutorConfig)


@EXECUTORS.register("inprocess")
async def inprocess_executor(
    config: ExecutorConfig, build: NodeBuilder | None, *, gym_head_address: str | None = None
) -> StageExecutor:
    return InProcessExecutor()


@EXECUTORS.register("processes")
async def process_executor(
    config: ExecutorConfig, build: NodeBuilder | None, *, gym_head_address: str | None = None
) -> StageExecutor:
    """`processes.workers` worker processes started, each with its runtime built by `build`."""
    if build is None:
        raise ValueError("executor.kind=processes needs a node builder")
    executor = ProcessExecutor(config.processes, build)
    await executor.start()
    return executor


@EXECUTORS.register("ray")
async def ray_executor(
    config: ExecutorConfig, build: NodeBuilder | None, *, gym_head_address: str | None = None
) -> StageExecutor:
    """The cluster joined and one actor per node ready, each built by `build`."""
    if build is None:
        raise ValueError("executor.kind=ray needs a node builder")
    executor = RayExecutor(config.ray, build, gym_head_address=gym_head_address)
    await executor.start()
    return executor


async def make_executor(
    config: ExecutorConfig, build: NodeBuilder | None, *, gym_head_address: str | None = None
) -> StageExecutor:
    """The configured executor, started."""
    return await EXECUTORS.create(config.kind, config, build, gym_head_address=gym_head_address)
