# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""`executor.kind` names an executor in the `EXECUTORS` registry: a built-in, one registered by a
user, or an import target `package.module:factory`; anything else is refused when the config is
read, with the names it could have been."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from nemo_gym_prorl.pipeline.executor import InProcessExecutor, StageExecutor
from nemo_gym_prorl.pipeline.executors import EXECUTORS, ExecutorConfig, make_executor
from nemo_gym_prorl.pipeline.ray_executor import NodeBuilder

built: list[ExecutorConfig] = []


@EXECUTORS.register("recording_for_tests")
async def recording_executor(
    config: ExecutorConfig, build: NodeBuilder | None, *, gym_head_address: str | None = None
) -> StageExecutor:
    built.append(config)
    return InProcessExecutor()


def test_the_default_runs_stages_in_process() -> None:
    assert ExecutorConfig().kind == "inprocess"
    assert ExecutorConfig(kind="ray").kind == "ray"


def test_an_unknown_kind_is_refused_naming_the_known_executors() -> None:
    with pytest.raises(ValidationError, match=r"unknown executor 'kubernetes'") as refused:
        ExecutorConfig(kind="kubernetes")
    message = str(refused.value)
    assert "'inprocess'" in message and "'ray'" in message and "package.module:factory" in message


def test_an_import_target_that_does_not_import_is_refused() -> None:
    with pytest.raises(ValidationError, match=r"cannot import module 'no_such_package\.executors'"):
        ExecutorConfig(kind="no_such_package.executors:make")


async def test_a_user_registered_executor_is_chosen_from_config() -> None:
    config = ExecutorConfig.model_validate({"kind": "recording_for_tests"})
    executor = await make_executor(config, None)
    assert isinstance(executor, InProcessExecutor) and built == [config]


async def test_an_import_target_is_chosen_from_config() -> None:
    config = ExecutorConfig(kind="nemo_gym_prorl.pipeline.executors:inprocess_executor")
    assert isinstance(await make_executor(config, None), InProcessExecutor)
