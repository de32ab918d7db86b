# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Model dialects: one interface (`Dialect.generate`), one module per server protocol."""

from nemo_gym_prorl.llm.dialects.base import Dialect, Generation, TurnContext
from nemo_gym_prorl.llm.dialects.nemo_rl import NemoRLChatDialect
from nemo_gym_prorl.llm.dialects.structured import ConstrainedToolCalls, TrajectoryConstraint
from nemo_gym_prorl.llm.dialects.vllm import VLLMCompletionsDialect
from nemo_gym_prorl.llm.toolcalls import ToolCallFormat

DIALECTS: dict[str, type[Dialect]] = {
    VLLMCompletionsDialect.name: VLLMCompletionsDialect,
    NemoRLChatDialect.name: NemoRLChatDialect,
}


def make_dialect(
    name: str,
    *,
    tool_call_format: ToolCallFormat = "hermes",
    constrained: ConstrainedToolCalls | None = None,
) -> Dialect:
    """Build a dialect by its config name (`vllm` or `nemo_rl`). Constrained tool calling is
    an option of the `vllm` dialect only (it sends the prompt, and the grammar, itself)."""
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
    "TrajectoryConstraint",
    "Dialect",
    "Generation",
    "NemoRLChatDialect",
    "TurnContext",
    "VLLMCompletionsDialect",
    "make_dialect",
]
