# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""A row's model can call every tool its prompt tells it about: the tools a domain serves for a
row are the ones the row declares, not only the domain's defaults."""

from __future__ import annotations

from nemo_gym_prorl.tasks.math import MathTask


def _row(*names: str, **extra: object) -> dict:
    tools = [{"type": "function", "name": n, "parameters": {"type": "object"}} for n in names]
    return {"responses_create_params": {"input": [], "tools": tools}, **extra}


def test_the_tools_a_prompt_declares_are_the_tools_offered() -> None:
    assert MathTask().tool_names(_row("ipython", "submit")) == ["ipython", "submit"]


def test_tools_the_toolbox_does_not_implement_are_left_out() -> None:
    assert MathTask().tool_names(_row("ipython", "web_search")) == ["ipython"]


def test_an_explicit_tools_offered_list_wins_and_defaults_fill_in_when_nothing_is_declared() -> None:
    assert MathTask().tool_names(_row("ipython", "submit", tools_offered=["bash"])) == ["bash"]
    assert MathTask().tool_names({"responses_create_params": {"input": []}}) == ["ipython", "submit"]
