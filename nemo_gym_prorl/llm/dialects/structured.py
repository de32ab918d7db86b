# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Constrained tool calling: a vLLM structured-outputs structural tag (compiled by xgrammar)
built from a trajectory's tool specs, per turn.

What the model may write on turn t (0-based), with policy (tool_turns=k, answer_turn=m):

    t < k        exactly one call of a working tool (not the finish tool), nothing after it
    k <= t < m   one call of any tool (the finish tool included), or the final answer
    t >= m       the final answer: the finish tool, or text in the domain's answer format

Each call is a tag in the chosen tool-call format whose arguments follow the tool's JSON
schema, every string bounded (`max_string_length`) so a call always fits in a turn. The
final answer, when the task has a format for it (`Answer: [A-D]`, `\\boxed{...}`, a python
block), is a regex.

The log-probs of a constrained turn come from the masked distribution, not the policy's own:
use this for demos, smoke tests and cold-start data, not for on-policy RL unless the trainer
accounts for the mask. Every turn records which constraint it was sampled under.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

ConstrainedFormat = Literal["hermes", "llama3_json", "qwen3_coder"]
TurnMode = Literal["tool", "tool_or_answer", "answer"]


class ConstrainedToolCalls(BaseModel):
    """Config of constrained tool calling (off unless `enabled`)."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(False, description="send a structural tag with every turn that has tools")
    tool_format: ConstrainedFormat = Field(
        "hermes", description="the markup calls are forced into (must match the parser's format)"
    )
    finish_tool: str = Field("submit", description="the tool that ends a trajectory")
    tool_turns: int = Field(
        2, ge=0, description="turns before this one must call a working tool (not the finish tool)"
    )
    answer_turn: int | None = Field(
        3, ge=0, description="from this turn on the model must answer (finish tool or answer format)"
    )
    max_string_length: int = Field(
        240, ge=1, description="bound on every string argument (characters), so a call fits a turn"
    )
    constrain_answer: bool = Field(
        True, description="the final answer must match the task's answer format, where it has one"
    )

    @model_validator(mode="after")
    def _ordered(self) -> ConstrainedToolCalls:
        if self.answer_turn is not None and self.answer_turn < self.tool_turns:
            raise ValueError(
                f"answer_turn ({self.answer_turn}) must not come before tool_turns ({self.tool_turns})"
            )
        return self


class TrajectoryConstraint(BaseModel):
    """What one trajectory's constraint is built from: its tools and its answer format."""

    tools: list[dict[str, Any]] = Field(description="OpenAI or Responses-style function specs")
    answer_pattern: str | None = Field(None, description="regex of the final answer, if the task has one")
    submit_pattern: str | None = Field(
        None, description="regex of the finish tool's `answer` argument, if the task reads a bare value"
    )


class DecodingRecord(BaseModel):
    """How one turn was decoded (kept in its `TurnRecord`: its log-probs are constrained ones)."""

    kind: Literal["structural_tag"] = "structural_tag"
    mode: TurnMode
    tool_format: ConstrainedFormat
    tools: list[str] = Field(description="the tools the turn could call")
    answer_pattern: str | None = None
    submit_pattern: str | None = Field(None, description="the pattern the finish tool's answer was held to")
    max_string_length: int


def _function(spec: dict[str, Any]) -> dict[str, Any]:
    return spec.get("function", spec) if isinstance(spec, dict) else {}


def _with_answer_pattern(schema: dict[str, Any], pattern: str | None) -> dict[str, Any]:
    """The finish tool's schema with its `answer` string held to `pattern` (when there is one)."""
    answer = (schema.get("properties") or {}).get("answer")
    if pattern is None or not isinstance(answer, dict) or answer.get("type") != "string":
        return schema
    properties = {**schema["properties"], "answer": {**answer, "pattern": pattern}}
    return {**schema, "properties": properties}


def bounded_schema(schema: Any, max_length: int) -> Any:
    """The schema with `maxLength` on every string that has none (nested ones too)."""
    if isinstance(schema, list):
        return [bounded_schema(item, max_length) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: bounded_schema(value, max_length) for key, value in schema.items()}
    kinds = out.get("type")
    if (kinds == "string" or (isinstance(kinds, list) and "string" in kinds)) and "enum" not in out:
        out["maxLength"] = min(int(out.get("maxLength", max_length)), max_length)
    return out


def _tool_tag(name: str, schema: dict[str, Any], tool_format: ConstrainedFormat) -> dict[str, Any]:
    if tool_format in ("hermes", "llama3_json"):  # the arguments object inside a JSON call
        key = "arguments" if tool_format == "hermes" else "parameters"
        begin, end = f'{{"name": {json.dumps(name)}, "{key}": ', "}"
        if tool_format == "hermes":
            begin, end = f"<tool_call>\n{begin}", f"{end}\n</tool_call>"
        return {
            "type": "tag",
            "begin": begin,
            "content": {"type": "json_schema", "json_schema": schema},
            "end": end,
        }
    return {
        "type": "tag",
        "begin": f"<tool_call>\n<function={name}>\n",
        "content": {"type": "json_schema", "json_schema": schema, "style": "qwen_xml"},
        "end": "\n</function>\n</tool_call>",
    }


_TRIGGERS: dict[ConstrainedFormat, str] = {
    "hermes": "<tool_call>",
    "llama3_json": '{"name": ',
    "qwen3_coder": "<tool_call>",
}


def turn_mode(policy: ConstrainedToolCalls, turn: int) -> TurnMode:
    if turn < policy.tool_turns:
        return "tool"
    if policy.answer_turn is not None and turn >= policy.answer_turn:
        return "answer"
    return "tool_or_answer"


def structural_tag(
    policy: ConstrainedToolCalls, constraint: TrajectoryConstraint, turn: int
) -> tuple[dict[str, Any], DecodingRecord] | None:
    """The structural tag for this turn and its record, or None when nothing is constrained
    (the turn has no tool to call and no answer format)."""
    mode = turn_mode(policy, turn)
    functions = [f for f in map(_function, constraint.tools) if isinstance(f.get("name"), str)]
    finish = [f for f in functions if f["name"] == policy.finish_tool]
    working = [f for f in functions if f["name"] != policy.finish_tool]
    answer = constraint.answer_pattern if policy.constrain_answer else None
    if mode == "tool":
        callable_ = working or finish
    elif mode == "answer":
        callable_ = finish
    else:
        callable_ = functions
    allow_answer = mode != "tool" or not callable_
    if not callable_ and not (allow_answer and answer):
        return None
    submit = constraint.submit_pattern if policy.constrain_answer else None
    tags = [
        _tool_tag(
            f["name"],
            bounded_schema(
                _with_answer_pattern(f.get("parameters") or {"type": "object"}, submit)
                if f["name"] == policy.finish_tool
                else f.get("parameters") or {"type": "object"},
                policy.max_string_length,
            ),
            policy.tool_format,
        )
        for f in callable_
    ]
    call = {
        "type": "triggered_tags",
        "triggers": [_TRIGGERS[policy.tool_format]],
        "tags": tags,
        "at_least_one": True,
        "stop_after_first": True,
    }
    elements: list[dict[str, Any]] = []
    if tags:
        elements.append(call)
    if allow_answer and answer:
        elements.append({"type": "regex", "pattern": answer})
    fmt = elements[0] if len(elements) == 1 else {"type": "or", "elements": elements}
    record = DecodingRecord(
        mode=mode,
        tool_format=policy.tool_format,
        tools=[f["name"] for f in callable_],
        answer_pattern=answer if allow_answer else None,
        submit_pattern=submit if any(f["name"] == policy.finish_tool for f in callable_) else None,
        max_string_length=policy.max_string_length,
    )
    return {"type": "structural_tag", "format": copy.deepcopy(fmt)}, record


def decoding_summary(turns: Sequence[Any]) -> dict[str, Any] | None:
    """For a trajectory's record: whether and how its turns were constrained (None: no turn was).
    `turns` are `TurnRecord`s (their `decoding` is a `DecodingRecord` dump or None)."""
    records = [DecodingRecord.model_validate(t.decoding) for t in turns if t.decoding]
    if not records:
        return None
    modes: dict[str, int] = {}
    for record in records:
        modes[record.mode] = modes.get(record.mode, 0) + 1
    first = records[0]
    return {
        "constrained": True,
        "kind": first.kind,
        "tool_format": first.tool_format,
        "constrained_turns": len(records),
        "unconstrained_turns": len(turns) - len(records),
        "turn_modes": modes,
        "answer_pattern": next((r.answer_pattern for r in records if r.answer_pattern), None),
        "max_string_length": first.max_string_length,
        "log_probs": "from the constrained (masked) distribution, not the unconstrained policy",
    }
