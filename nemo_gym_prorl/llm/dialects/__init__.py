# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Model dialects: one interface (`Dialect.generate`), one module per server protocol."""

from nemo_gym_prorl.llm.dialects.base import Dialect, Generation, TurnContext
from nemo_gym_prorl.llm.dialects.nemo_rl import NemoRLChatDialect
from nemo_gym_prorl.llm.dialects.vllm import VLLMCompletionsDialect

DIALECTS: dict[str, type[Dialect]] = {
    VLLMCompletionsDialect.name: VLLMCompletionsDialect,
    NemoRLChatDialect.name: NemoRLChatDialect,
}


def make_dialect(name: str) -> Dialect:
    """Build a dialect by its config name (`vllm` or `nemo_rl`)."""
    try:
        return DIALECTS[name]()
    except KeyError:
        raise ValueError(f"unknown dialect {name!r}; choose one of {sorted(DIALECTS)}") from None


__all__ = [
    "DIALECTS",
    "Dialect",
    "Generation",
    "NemoRLChatDialect",
    "TurnContext",
    "VLLMCompletionsDialect",
    "make_dialect",
]
