# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The first messages of a trajectory: the task's own prompt plus how to call tools.

Everything here is a pure function of the task row and the tool list: no timestamps, ids or
sampling. NeMo RL groups GRPO samples by their first-turn prompt tokens, so every sample of a
task must render byte-identical first messages.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nemo_gym_prorl.llm.access import ToolPromptStyle
from nemo_gym_prorl.llm.records import ChatMessage
from nemo_gym_prorl.llm.toolprompt import (  # noqa: F401 (the convention's names, re-exported)
    DEFAULT_SYSTEM_PROMPT,
    FINISH_WITH_ANSWER,
    FINISH_WITH_SUBMIT,
    TOOL_INSTRUCTIONS,
    system_with_tools,
    tool_instructions,
)


class PromptError(ValueError):
    """The row's prompt cannot be turned into chat messages."""


def _text(content: Any) -> str:
    """Responses-API content (a string or a list of parts) as plain text."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, Mapping) and isinstance(part.get("text"), str):
                parts.append(part["text"])
            else:
                raise PromptError(f"unsupported content part: {part!r:.120}")
        return "".join(parts)
    raise PromptError(f"unsupported message content: {content!r:.120}")


def row_messages(row: Mapping[str, Any]) -> list[ChatMessage]:
    """The prompt of a Gym dataset row (`responses_create_params.input`), as chat messages."""
    params = row.get("responses_create_params")
    if not isinstance(params, Mapping) or "input" not in params:
        raise PromptError("the row has no `responses_create_params.input`")
    raw = params["input"]
    if isinstance(raw, str):
        raw = [{"role": "user", "content": raw}]
    if not isinstance(raw, list) or not raw:
        raise PromptError("`responses_create_params.input` must be a string or a non-empty list of messages")
    messages: list[ChatMessage] = []
    for item in raw:
        if not isinstance(item, Mapping) or item.get("role") not in (
            "system",
            "developer",
            "user",
            "assistant",
        ):
            raise PromptError(f"unsupported input item: {item!r:.120}")
        role = "system" if item["role"] == "developer" else item["role"]
        messages.append(ChatMessage(role=role, content=_text(item.get("content"))))
    instructions = params.get("instructions")
    if isinstance(instructions, str) and instructions.strip():
        messages.insert(0, ChatMessage(role="system", content=instructions))
    return messages


def initial_messages(
    row: Mapping[str, Any],
    tool_specs: list[dict[str, Any]],
    *,
    style: ToolPromptStyle = "system",
    default_system_prompt: str = DEFAULT_SYSTEM_PROMPT,
) -> list[ChatMessage]:
    """The messages of turn 0. With `style="system"` the tools are described in the system
    message in the hermes convention (works with any chat template, including ones that know
    nothing of tools); with `"template"` the caller passes the specs to the server's template."""
    messages = row_messages(row)
    if style == "template" or not tool_specs:
        return messages
    if messages[0].role == "system":
        content = system_with_tools(messages[0].content or "", tool_specs)
        messages[0] = ChatMessage(role="system", content=content)
    else:
        content = system_with_tools(None, tool_specs, default_system_prompt=default_system_prompt)
        messages.insert(0, ChatMessage(role="system", content=content))
    return messages
