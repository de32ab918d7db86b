# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""What every tool-call format shares: the parse result, call ids, and reading one call's
name and arguments out of a decoded JSON payload.

Models get tool calls wrong all the time (truncated JSON, prose instead of JSON, a missing
name). None of that may raise: each bad call becomes a `ToolCallError` whose observation goes
back to the model as the tool result, and the trajectory continues.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, Field

from nemo_gym_prorl.llm.records import ToolCall, ToolCallError


class ParsedCalls(BaseModel):
    content: str = Field(description="the text with tool-call markup removed, stripped")
    calls: list[ToolCall] = Field(default_factory=list)
    errors: list[ToolCallError] = Field(default_factory=list)

    def add(self, parsed: ToolCall | ToolCallError) -> None:
        if isinstance(parsed, ToolCall):
            self.calls.append(parsed)
        else:
            self.errors.append(parsed)


def call_id(turn: int, index: int) -> str:
    # Deterministic ids: two samples of the same task must render identical prompts
    # (NeMo RL groups GRPO baselines by first-turn tokens; later turns stay reproducible too).
    return f"call_{turn}_{index}"


def from_payload(payload: Any, *, call_id: str, raw: str) -> ToolCall | ToolCallError:
    """A call from `{"name": ..., "arguments" | "parameters": {...}}` (any JSON format)."""
    if not isinstance(payload, dict):
        return ToolCallError(
            id=call_id, raw=raw, error=f"expected a JSON object, got {type(payload).__name__}"
        )
    name = payload.get("name")
    if not isinstance(name, str) or not name.strip():
        return ToolCallError(id=call_id, raw=raw, error="missing or empty 'name'")
    arguments = payload.get("arguments", payload.get("parameters", {}))
    return with_arguments(name.strip(), arguments, call_id=call_id, raw=raw)


def with_arguments(name: str, arguments: Any, *, call_id: str, raw: str) -> ToolCall | ToolCallError:
    if isinstance(arguments, str):
        # Some models double-encode the arguments as a JSON string; accept that form.
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except ValueError as exc:
            return ToolCallError(
                id=call_id, raw=raw, name=name, error=f"'arguments' is not valid JSON: {exc}"
            )
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        return ToolCallError(id=call_id, raw=raw, name=name, error="'arguments' must be a JSON object")
    return ToolCall(id=call_id, name=name, arguments=arguments, raw=raw)


def parse_server_tool_calls(tool_calls: list[Any], *, turn: int = 0) -> ParsedCalls:
    """Parse OpenAI `message.tool_calls` (from a server-side tool parser)."""
    parsed = ParsedCalls(content="")
    for index, item in enumerate(tool_calls):
        raw = json.dumps(item, ensure_ascii=False) if not isinstance(item, str) else item
        this_id = call_id(turn, index)
        if not isinstance(item, dict):
            parsed.errors.append(ToolCallError(id=this_id, raw=raw, error="tool call entry is not an object"))
            continue
        this_id = str(item.get("id") or this_id)
        function = item.get("function")
        if not isinstance(function, dict):
            parsed.errors.append(ToolCallError(id=this_id, raw=raw, error="missing 'function' object"))
            continue
        parsed.add(from_payload(function, call_id=this_id, raw=raw))
    return parsed


def tool_call_to_openai(call: ToolCall) -> dict[str, Any]:
    """The OpenAI wire form of a parsed call (for assistant messages sent back to a server)."""
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": json.dumps(call.arguments, ensure_ascii=False)},
    }
