# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Fixtures for agent-loop unit tests: the scripted model (tests/support/scripted_model.py), a dead backend;
for the harness tests, a scripted policy behind a real HTTP backend (`FakeLLM`) and the pool in front of it."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator

import pytest
from harness.harness_helpers import ScriptedLLM
from support.fake_llm import FakeLLM
from support.scripted_model import ScriptedDialect

from nemo_gym_prorl.llm.access import LLMAccess
from nemo_gym_prorl.llm.dialects.vllm import VLLMCompletionsDialect
from nemo_gym_prorl.llm.errors import RetriesExhaustedError
from nemo_gym_prorl.llm.pool import LLMBackendPool, PoolConfig
from nemo_gym_prorl.llm.records import SamplingParams


def dead_backend() -> RetriesExhaustedError:
    return RetriesExhaustedError("all 3 attempts failed: connection refused", errors=[])


@pytest.fixture
async def pool() -> AsyncIterator[LLMBackendPool]:
    async with LLMBackendPool() as p:
        yield p


@pytest.fixture
def scripted() -> type[ScriptedDialect]:
    return ScriptedDialect


@pytest.fixture
def dead() -> RetriesExhaustedError:
    return dead_backend()


@pytest.fixture
async def scripted_llm() -> AsyncIterator[ScriptedLLM]:
    """`await scripted_llm(reply, ...)`: the policy answers each call with the next reply, then
    the last one again."""
    backends: list[FakeLLM] = []
    pools: list[LLMBackendPool] = []

    async def make(*replies: str) -> LLMAccess:
        script = itertools.chain(replies, itertools.repeat(replies[-1]))
        backend = await FakeLLM(responder=lambda prompt: next(script), max_model_len=32768).start()
        backends.append(backend)
        pool = LLMBackendPool(PoolConfig(backends=[backend.url], request_timeout_s=10))
        await pool.start()
        pools.append(pool)
        return LLMAccess(
            pool=pool,
            dialect=VLLMCompletionsDialect(),
            model="fake",
            default_sampling=SamplingParams(max_tokens=256),
        )

    yield make
    for pool in pools:
        await pool.aclose()
    for backend in backends:
        await backend.kill()
