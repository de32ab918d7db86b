# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Tool-call parsing: the formats models write (hermes, Llama 3 JSON, Mistral, Qwen3-Coder XML,
pythonic) and server-parsed OpenAI `tool_calls`. Malformed calls become error observations.
`PARSERS` is the registry of formats; an import target `package.module:parse` adds one."""

from nemo_gym_prorl.llm.toolcalls.common import ParsedCalls, parse_server_tool_calls, tool_call_to_openai
from nemo_gym_prorl.llm.toolcalls.detect import (
    ToolCallFormatChoice,
    chat_template_of,
    format_from_chat_template,
    resolve_tool_call_format,
)
from nemo_gym_prorl.llm.toolcalls.formats import (
    PARSERS,
    ToolCallFormat,
    parse_hermes,
    parse_llama3_json,
    parse_mistral,
    parse_pythonic,
    parse_qwen3_coder,
    parse_tool_calls,
)

__all__ = [
    "PARSERS",
    "ParsedCalls",
    "ToolCallFormat",
    "ToolCallFormatChoice",
    "chat_template_of",
    "format_from_chat_template",
    "parse_hermes",
    "parse_llama3_json",
    "parse_mistral",
    "parse_pythonic",
    "parse_qwen3_coder",
    "parse_server_tool_calls",
    "parse_tool_calls",
    "resolve_tool_call_format",
    "tool_call_to_openai",
]
