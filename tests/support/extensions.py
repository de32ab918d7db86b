# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Extensions as a user writes them outside the package, named in configs by import target
(`support.extensions:SiteDialect`): a dialect, a tool-call format and a sandbox backend."""

from __future__ import annotations

import json
from typing import Any

from nemo_gym_prorl.llm.dialects import ConstrainedToolCalls, VLLMCompletionsDialect
from nemo_gym_prorl.llm.toolcalls import ParsedCalls
from nemo_gym_prorl.llm.toolcalls.common import call_id, with_arguments
from nemo_gym_prorl.sandbox.bubblewrap import BubblewrapSandbox


class SiteDialect(VLLMCompletionsDialect):
    """vLLM's dialect with the sampling extras one site's servers want."""

    name = "site_vllm"

    def __init__(self, *, tool_call_format: str, constrained: ConstrainedToolCalls | None = None) -> None:
        super().__init__(extra_body={"top_k": 20}, tool_call_format=tool_call_format, constrained=constrained)


def parse_call_lines(
    text: str, *, turn: int = 0, tool_specs: list[dict[str, Any]] | None = None
) -> ParsedCalls:
    """A house format: one `CALL name {json arguments}` per line; other lines are prose."""
    parsed = ParsedCalls(content="")
    prose = []
    for line in text.splitlines():
        if not line.startswith("CALL "):
            prose.append(line)
            continue
        name, _, arguments = line.removeprefix("CALL ").partition(" ")
        this_id = call_id(turn, len(parsed.calls) + len(parsed.errors))
        parsed.add(with_arguments(name, json.loads(arguments or "{}"), call_id=this_id, raw=line))
    parsed.content = "\n".join(prose).strip()
    return parsed


def wrong_product(*_: Any, **__: Any) -> str:
    """A factory that builds the wrong thing: the registry must say so, not the first rollout."""
    return "neither a dialect nor a sandbox"


class ScratchSandbox(BubblewrapSandbox):
    """A backend of one's own (here: bubblewrap under another name)."""

    backend = "scratch"
