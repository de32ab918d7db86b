# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Tool-call parsing: hermes-style text and server-parsed `tool_calls`.

Models get tool calls wrong all the time (truncated JSON, prose instead of JSON, a missing
name). None of that may raise: each bad call becomes a `ToolCallError` whose observation goes
back to the model as the tool result, and the trajectory continues.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, Field

from nemo_gym_prorl.llm.records import ToolCall, ToolCallError

_HERMES_BLOCK = re.compile(r"<tool_call>(.*?)</tool_call>", re.S)
_HERMES_OPEN = "<tool_call>"


class ParsedCalls(BaseModel):
    content: str = Field(description="the text with tool-call markup removed, stripped")
    calls: list[ToolCall] = Field(default_factory=list)
    errors: list[ToolCallError] = Field(default_factory=list)


def _call_id(turn: int, index: int) -> str:
    # Deterministic ids: two samples of the same task must render identical prompts
    # (NeMo RL groups GRPO baselines by first-turn tokens; later turns stay reproducible too).
    return f"call_{turn}_{index}"


def _from_payload(payload: Any, *, call_id: str, raw: str) -> ToolCall | ToolCallError:
    if not isinstance(payload, dict):
        return ToolCallError(
            id=call_id, raw=raw, error=f"expected a JSON object, got {type(payload).__name__}"
        )
    name = payload.get("name")
    if not isinstance(name, str) or not name.strip():
        return ToolCallError(id=call_id, raw=raw, error="missing or empty 'name'")
    arguments = payload.get("arguments", payload.get("parameters", {}))
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
    return ToolCall(id=call_id, name=name.strip(), arguments=arguments, raw=raw)


def parse_hermes(text: str, *, turn: int = 0) -> ParsedCalls:
    """Parse `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` blocks.

    An opening tag without a closing one (generation cut by max_tokens) is an error too."""
    calls: list[ToolCall] = []
    errors: list[ToolCallError] = []
    index = 0
    for match in _HERMES_BLOCK.finditer(text):
        raw = match.group(1).strip()
        call_id = _call_id(turn, index)
        index += 1
        try:
            payload = json.loads(raw)
        except ValueError as exc:
            errors.append(ToolCallError(id=call_id, raw=raw, error=f"not valid JSON: {exc}"))
            continue
        parsed = _from_payload(payload, call_id=call_id, raw=raw)
        (calls if isinstance(parsed, ToolCall) else errors).append(parsed)  # type: ignore[arg-type]
    content = _HERMES_BLOCK.sub("", text)
    dangling = content.find(_HERMES_OPEN)
    if dangling != -1:
        raw = content[dangling + len(_HERMES_OPEN) :].strip()
        errors.append(
            ToolCallError(id=_call_id(turn, index), raw=raw, error="unterminated <tool_call> block")
        )
        content = content[:dangling]
    return ParsedCalls(content=content.strip(), calls=calls, errors=errors)


def parse_server_tool_calls(tool_calls: list[Any], *, turn: int = 0) -> ParsedCalls:
    """Parse OpenAI `message.tool_calls` (from a server-side tool parser)."""
    calls: list[ToolCall] = []
    errors: list[ToolCallError] = []
    for index, item in enumerate(tool_calls):
        raw = json.dumps(item, ensure_ascii=False) if not isinstance(item, str) else item
        call_id = _call_id(turn, index)
        if not isinstance(item, dict):
            errors.append(ToolCallError(id=call_id, raw=raw, error="tool call entry is not an object"))
            continue
        call_id = str(item.get("id") or call_id)
        function = item.get("function")
        if not isinstance(function, dict):
            errors.append(ToolCallError(id=call_id, raw=raw, error="missing 'function' object"))
            continue
        parsed = _from_payload(function, call_id=call_id, raw=raw)
        (calls if isinstance(parsed, ToolCall) else errors).append(parsed)  # type: ignore[arg-type]
    return ParsedCalls(content="", calls=calls, errors=errors)


def tool_call_to_openai(call: ToolCall) -> dict[str, Any]:
    """The OpenAI wire form of a parsed call (for assistant messages sent back to a server)."""
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": json.dumps(call.arguments, ensure_ascii=False)},
    }
