# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Fixtures of the training-support tests: a fake backend whose character-level tokenizer and
ChatML template make token arithmetic readable (the real-tokenizer identity is checked against
the embedded vLLM in the `vllm`-marked test)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from support.fake_llm import FakeLLM


@pytest.fixture
async def tokenizer_backend() -> AsyncIterator[FakeLLM]:
    server = await FakeLLM().start()
    yield server
    await server.kill()
