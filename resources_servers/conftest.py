# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""What every resources server's tests share: the Gym response a rollout hands to `/verify`."""

from collections.abc import Callable
from typing import Any

import pytest


def _response(text: str) -> dict[str, Any]:
    return {"id": "r", "created_at": 0, "model": "m", "object": "response", "parallel_tool_calls": False,
            "tool_choice": "auto", "tools": [], "output": [{"id": "m1", "type": "message", "role": "assistant",
            "status": "completed", "content": [{"type": "output_text", "text": text, "annotations": []}]}]}  # fmt: skip


@pytest.fixture
def response_with() -> Callable[[str], dict[str, Any]]:
    """`response_with(text)`: a NeMo Gym response whose one assistant message says `text`."""
    return _response
