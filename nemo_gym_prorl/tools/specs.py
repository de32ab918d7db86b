# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The tools as the model sees them: OpenAI function-tool JSON schemas, generated from the same
pydantic models that validate the model's arguments, so schema and validation cannot drift."""

from __future__ import annotations

import copy
import functools
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from nemo_gym_prorl.tools.editor import EditorCommand

ToolName = Literal["bash", "ipython", "editor", "submit"]
ALL_TOOLS: tuple[ToolName, ...] = ("bash", "ipython", "editor", "submit")


class BashArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    command: str = Field(description="The bash command(s) to run. Multi-line scripts and heredocs are fine.")
    timeout: float | None = Field(
        None,
        gt=0,
        description="Seconds before the command is interrupted; give it for long, quiet commands "
        "(builds, test suites). Default set by the environment.",
    )


class IPythonArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    code: str = Field(description="Python code to run as one cell in a persistent IPython kernel.")


class SubmitArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    answer: str = Field(description="Your final answer (for math, the final value, e.g. \\boxed{42}).")


ARGUMENT_MODELS: dict[ToolName, type[BaseModel]] = {
    "bash": BashArgs,
    "ipython": IPythonArgs,
    "editor": EditorCommand,
    "submit": SubmitArgs,
}

DESCRIPTIONS: dict[ToolName, str] = {
    "bash": (
        "Run a command in a persistent bash shell inside the sandbox (working directory and "
        "environment variables persist between calls). Returns the combined stdout/stderr and the "
        "exit code. Long outputs are cut in the middle. Interactive programs are not supported: "
        "pass input through pipes or flags. A command that runs too long, or prints nothing for a "
        "while, is interrupted."
    ),
    "ipython": (
        "Run Python code in a persistent IPython kernel inside the sandbox (variables and imports "
        "persist between calls). Returns printed output, the value of the last expression, errors "
        "with tracebacks, and images from matplotlib."
    ),
    "editor": (
        "View, create and edit files in the workspace. `view` shows a file with line numbers (or a "
        "directory listing 2 levels deep); `create` writes a new file (or overwrites one); "
        "`str_replace` replaces `old_str`, which must occur exactly once, with `new_str`; `insert` "
        "adds `new_str` after line `insert_line`; `undo_edit` reverts the last edit of a file."
    ),
    "submit": "Submit your final answer and end the task. Call it exactly once, when you are done.",
}


def _clean(schema: Any) -> Any:
    """Pydantic's JSON schema, made plain for function calling: no titles, no null defaults,
    and `X | None` shown as `X` (an optional argument is simply not in `required`)."""
    if isinstance(schema, list):
        return [_clean(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "title" or (key == "default" and value is None):
            continue
        if key == "properties":
            out[key] = {name: _clean(prop) for name, prop in value.items()}
            continue
        out[key] = _clean(value)
    options = out.get("anyOf")
    if isinstance(options, list):
        non_null = [o for o in options if o != {"type": "null"}]
        if len(non_null) == 1 and len(non_null) < len(options):
            del out["anyOf"]
            out = {**non_null[0], **out}
    return out


def tool_spec(name: ToolName) -> dict[str, Any]:
    """One OpenAI function tool: {"type": "function", "function": {name, description, parameters}}.
    A fresh copy each time (callers may change it); the schema itself is built once."""
    return copy.deepcopy(_tool_spec(name))


@functools.cache
def _tool_spec(name: ToolName) -> dict[str, Any]:
    parameters = _clean(ARGUMENT_MODELS[name].model_json_schema())
    parameters.pop("description", None)  # a model docstring, meant for us, not the policy
    parameters.setdefault("required", [])
    return {
        "type": "function",
        "function": {"name": name, "description": DESCRIPTIONS[name], "parameters": parameters},
    }


def tool_specs(names: tuple[ToolName, ...] | list[ToolName] = ALL_TOOLS) -> list[dict[str, Any]]:
    return [tool_spec(name) for name in names]
