# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Tools described in the system prompt (`LLMConfig.tool_prompt: system`), for any chat template.

The built-in agent's first messages (`agent.prompts.initial_messages`) and the recording
endpoint's answer to a harness call that carries `tools` (`llm.recording`) both describe the
tools here, in the hermes convention (`<tool_call>` JSON), so a model whose template ignores
tools (SmolLM2's) still learns what it may call. A pure function of the system text and the
tools: every call of a conversation renders the same bytes.
"""

from __future__ import annotations

import json
from typing import Any

TOOL_INSTRUCTIONS = """\
You can use tools. The tools are described in JSON inside <tools></tools>:
<tools>
{tools}
</tools>
To call a tool, write one JSON object per call inside <tool_call></tool_call> tags:
<tool_call>
{{"name": "<tool name>", "arguments": {{<arguments as JSON>}}}}
</tool_call>
Each tool result comes back in a message from the tool. {finish}"""

FINISH_WITH_SUBMIT = "When you are done, call the `submit` tool with your final answer."
FINISH_WITH_ANSWER = "When you are done, reply with your final answer and no tool call."

DEFAULT_SYSTEM_PROMPT = "You are a helpful assistant that solves tasks step by step."


def tool_instructions(tool_specs: list[dict[str, Any]]) -> str:
    functions = [spec.get("function", spec) for spec in tool_specs]
    tools = "\n".join(json.dumps(f, sort_keys=True, ensure_ascii=False) for f in functions)
    names = {f.get("name") for f in functions}
    finish = FINISH_WITH_SUBMIT if "submit" in names else FINISH_WITH_ANSWER
    return TOOL_INSTRUCTIONS.format(tools=tools, finish=finish)


def system_with_tools(
    system: str | None,
    tool_specs: list[dict[str, Any]],
    *,
    default_system_prompt: str = DEFAULT_SYSTEM_PROMPT,
) -> str:
    """The system message's text with the tools described after it; `system` None: the
    conversation has no system message, and this one (the default prompt and the tools) leads it."""
    return f"{default_system_prompt if system is None else system}\n\n{tool_instructions(tool_specs)}"
