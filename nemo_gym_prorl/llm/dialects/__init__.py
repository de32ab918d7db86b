# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Model dialects: one interface (`Dialect.generate`), one module per server protocol."""

from typing import Literal

from nemo_gym_prorl.llm.dialects.base import Dialect, Generation, TurnContext
from nemo_gym_prorl.llm.dialects.nemo_rl import NemoRLChatDialect
from nemo_gym_prorl.llm.dialects.structured import ConstrainedToolCalls, TrajectoryConstraint
from nemo_gym_prorl.llm.dialects.vllm import VLLMCompletionsDialect
from nemo_gym_prorl.llm.toolcalls import ToolCallFormat, resolve_tool_call_format

DIALECTS: dict[str, type[Dialect]] = {
    VLLMCompletionsDialect.name: VLLMCompletionsDialect,
    NemoRLChatDialect.name: NemoRLChatDialect,
}


def make_dialect(
    name: str,
    *,
    tool_call_format: ToolCallFormat | Literal["auto"] = "auto",
    constrained: ConstrainedToolCalls | None = None,
    model_dir: str | None = None,
) -> Dialect:
    """Build a dialect by its config name (`vllm` or `nemo_rl`).

    `tool_call_format="auto"`: the format constrained decoding forces, if it is on; else the
    one the chat template of `model_dir` (a local model directory) teaches; else hermes.
    Constrained tool calling is an option of the `vllm` dialect only (it sends the prompt, and
    the grammar, itself)."""
    if tool_call_format == "auto":
        tool_call_format = (
            constrained.tool_format
            if constrained is not None and constrained.enabled
            else resolve_tool_call_format("auto", model_dir)
        )
    if name == VLLMCompletionsDialect.name:
        return VLLMCompletionsDialect(tool_call_format=tool_call_format, constrained=constrained)
    if name == NemoRLChatDialect.name:
        if constrained is not None and constrained.enabled:
            raise ValueError("constrained tool calling needs the `vllm` dialect, not `nemo_rl`")
        return NemoRLChatDialect(tool_call_format=tool_call_format)
    raise ValueError(f"unknown dialect {name!r}; choose one of {sorted(DIALECTS)}")


__all__ = [
    "DIALECTS",
    "ConstrainedToolCalls",
    "Dialect",
    "Generation",
    "NemoRLChatDialect",
    "TrajectoryConstraint",
    "TurnContext",
    "VLLMCompletionsDialect",
    "make_dialect",
]
