# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Which tool-call format a model writes, read from its chat template where the template says.

A chat template that supports tools shows the model how to call them; that text names the
format. A template that says nothing about tools (SmolLM2's, for instance) gets the default.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator

from nemo_gym_prorl.llm.toolcalls.formats import PARSERS, ToolCallFormat

AUTO = "auto"


def _auto_or_format(value: str) -> str:
    return value if value == AUTO else PARSERS.check(value)


# What a configuration may say: `auto` (read the model's chat template) or a format.
ToolCallFormatChoice = Annotated[str, AfterValidator(_auto_or_format)]

# Most specific first: Qwen3-Coder's template also contains <tool_call>.
_MARKERS: tuple[tuple[ToolCallFormat, tuple[str, ...]], ...] = (
    ("qwen3_coder", ("<function=", "<parameter=")),
    ("mistral", ("[TOOL_CALLS]",)),
    ("pythonic", ("[func_name1(",)),
    ("pythonic", ("<|python_start|>",)),
    ("llama3_json", ("<|python_tag|>",)),
    ("llama3_json", ('"parameters": dictionary of argument name and its value',)),
    ("hermes", ("<tool_call>",)),
)


def format_from_chat_template(template: str | None) -> ToolCallFormat | None:
    """The format a chat template teaches, or None if it does not tell."""
    if not template:
        return None
    for name, markers in _MARKERS:
        if all(marker in template for marker in markers):
            return name
    return None


def chat_template_of(model_dir: str | Path) -> str | None:
    """The chat template of a local Hugging Face model directory (tokenizer_config.json or
    chat_template.jinja), or None."""
    root = Path(model_dir)
    jinja = root / "chat_template.jinja"
    if jinja.is_file():
        return jinja.read_text(errors="replace")
    config = root / "tokenizer_config.json"
    if not config.is_file():
        return None
    try:
        template = json.loads(config.read_text()).get("chat_template")
    except (OSError, ValueError):
        return None
    if isinstance(template, list):  # named templates: [{"name": "default", "template": ...}, ...]
        template = "\n".join(str(t.get("template", "")) for t in template if isinstance(t, dict))
    return template if isinstance(template, str) else None


def resolve_tool_call_format(configured: str, model_dir: str | Path | None = None) -> ToolCallFormat:
    """`auto` means: what the model's chat template teaches, else hermes. Any other value must
    name a parser (a `RegistryError` says which exist)."""
    if configured != AUTO:
        return PARSERS.check(configured)
    if model_dir and Path(model_dir).is_dir():
        found = format_from_chat_template(chat_template_of(model_dir))
        if found is not None:
            return found
    return "hermes"
