# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Model dialects: one interface (`Dialect.generate`), one module per server protocol.

`DIALECTS` holds them by config name. A server protocol of one's own is a `Dialect` subclass
(or a function returning one) named by import target, `llm.dialect=mypkg.mod:MyDialect`; it is
built like the built-ins, with the keywords `tool_call_format` (a resolved format) and
`constrained` (`ConstrainedToolCalls`, or None when constrained decoding is off).
"""

from typing import Annotated

from pydantic import AfterValidator

from nemo_gym_prorl.llm.dialects.base import Dialect, Generation, TurnContext
from nemo_gym_prorl.llm.dialects.nemo_rl import NemoRLChatDialect
from nemo_gym_prorl.llm.dialects.structured import ConstrainedToolCalls, TrajectoryConstraint
from nemo_gym_prorl.llm.dialects.vllm import VLLMCompletionsDialect
from nemo_gym_prorl.llm.toolcalls import PARSERS, resolve_tool_call_format
from nemo_gym_prorl.registry import Registry, RegistryError

DIALECTS: Registry[Dialect] = Registry("dialect")
# A registered dialect name ("vllm", "nemo_rl") or an import target `package.module:factory`.
DialectName = Annotated[str, AfterValidator(DIALECTS.check)]

# Constrained tool calling is an option of the `vllm` dialect (it sends the prompt, and the
# grammar, itself); the class takes `constrained` and checks it against the format.
DIALECTS.register(VLLMCompletionsDialect.name, VLLMCompletionsDialect)


@DIALECTS.register(NemoRLChatDialect.name)
def nemo_rl_dialect(*, tool_call_format: str, constrained: ConstrainedToolCalls | None = None) -> Dialect:
    """NeMo RL's policy server applies the chat template itself: no grammar can be sent."""
    if constrained is not None and constrained.enabled:
        raise ValueError("constrained tool calling needs the `vllm` dialect, not `nemo_rl`")
    return NemoRLChatDialect(tool_call_format=tool_call_format)


def make_dialect(
    name: str,
    *,
    tool_call_format: str = "auto",
    constrained: ConstrainedToolCalls | None = None,
    model_dir: str | None = None,
) -> Dialect:
    """Build a dialect by its config name (`vllm`, `nemo_rl`) or import target.

    `tool_call_format="auto"`: the format constrained decoding forces, if it is on; else the
    one the chat template of `model_dir` (a local model directory) teaches; else hermes."""
    factory = DIALECTS.factory(name)
    if tool_call_format == "auto":
        tool_call_format = (
            constrained.tool_format
            if constrained is not None and constrained.enabled
            else resolve_tool_call_format("auto", model_dir)
        )
    PARSERS.check(tool_call_format)
    dialect = factory(tool_call_format=tool_call_format, constrained=constrained)
    if not isinstance(dialect, Dialect):
        raise RegistryError(f"dialect {name!r} built a {type(dialect).__name__}, not a Dialect")
    return dialect


__all__ = [
    "DIALECTS",
    "ConstrainedToolCalls",
    "Dialect",
    "DialectName",
    "Generation",
    "NemoRLChatDialect",
    "TrajectoryConstraint",
    "TurnContext",
    "VLLMCompletionsDialect",
    "make_dialect",
]
