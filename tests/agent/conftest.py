# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Fixtures for agent-loop unit tests: the scripted model (tests/support/scripted_model.py), a dead backend."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from support.scripted_model import ScriptedDialect

from nemo_gym_prorl.llm.errors import RetriesExhaustedError
from nemo_gym_prorl.llm.pool import LLMBackendPool


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
