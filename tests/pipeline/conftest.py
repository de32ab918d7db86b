# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Pipelines over scripted handlers (pure asyncio: fast and deterministic enough)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from support.scripted_stages import ScriptedHandler

from nemo_gym_prorl.pipeline import HandlerRegistry, Pipeline, PipelineConfig

MakePipeline = Callable[..., Any]


@pytest.fixture
async def make_pipeline() -> AsyncIterator[MakePipeline]:
    made: list[Pipeline] = []

    async def make(handler: Any | None = None, **config: Any) -> tuple[Pipeline, ScriptedHandler]:
        handler = handler or ScriptedHandler()
        registry = HandlerRegistry()
        registry.register("s", handler, aliases=["scripted_source"])
        config.setdefault("deadline_check_s", 0.05)
        pipeline = Pipeline(registry, PipelineConfig(**config))
        await pipeline.start()
        made.append(pipeline)
        return pipeline, handler

    yield make
    for pipeline in made:
        await pipeline.stop()
