# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""A rollout record (the Gym `/run` result the demo and NeMo RL write, one JSON object per line)
seen as a person reads it: the prompt, then turns of model output, tool calls and observations,
with token counts, reward and stop reason. `prorl show` and the HTML report both render this."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

StepKind = Literal["system", "user", "assistant", "tool_call", "invalid_tool_call", "observation"]


class TrajectoryFileError(ValueError):
    """The file is not a trajectories JSONL."""


@dataclass
class Step:
    kind: StepKind
    text: str
    name: str | None = None  # the tool, for tool calls


@dataclass
class Turn:
    number: int
    prompt_tokens: int = 0
    generated_tokens: int = 0
    steps: list[Step] = field(default_factory=list)

    @property
    def tool_calls(self) -> int:
        return sum(s.kind in ("tool_call", "invalid_tool_call") for s in self.steps)


@dataclass
class TrajectoryView:
    index: int
    facts: dict[str, Any]
    prompt: list[Step]
    turns: list[Turn]

    @property
    def title(self) -> str:
        f = self.facts
        return (
            f"#{self.index} {f['task']} reward={f['reward']} stop={f['stop_reason']} turns={len(self.turns)}"
        )


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, Mapping))
    return "" if content is None else json.dumps(content, ensure_ascii=False)


def _arguments(raw: Any) -> str:
    try:
        return json.dumps(json.loads(raw), ensure_ascii=False) if isinstance(raw, str) else json.dumps(raw)
    except ValueError:
        return str(raw)


def turns_of(output: list[Any]) -> list[Turn]:
    """Group Responses-API output items into model turns: a turn's generated items end with the
    one carrying its token ids; the tool outputs after it belong to it."""
    turns: list[Turn] = []
    current: Turn | None = None
    closed = True
    for item in output:
        if not isinstance(item, Mapping):
            continue
        kind = item.get("type")
        if kind == "function_call_output":
            if current is None:
                current = Turn(len(turns) + 1)
                turns.append(current)
            current.steps.append(Step("observation", _text(item.get("output"))))
            continue
        if closed or current is None:
            current = Turn(len(turns) + 1)
            turns.append(current)
            closed = False
        if kind == "message":
            current.steps.append(Step("assistant", _text(item.get("content"))))
        elif kind == "function_call":
            broken = item.get("status") == "incomplete"
            current.steps.append(
                Step(
                    "invalid_tool_call" if broken else "tool_call",
                    str(item.get("arguments")) if broken else _arguments(item.get("arguments")),
                    str(item.get("name") or "?"),
                )
            )
        generated = item.get("generation_token_ids") or []
        if generated:
            current.prompt_tokens = len(item.get("prompt_token_ids") or [])
            current.generated_tokens = len(generated)
            closed = True
    return turns


def _harness_fact(harness: Any) -> str | None:
    """A harness rollout's one-line record: which harness, how it ended, its model calls and the
    share of them merged into one token sequence."""
    if not isinstance(harness, Mapping):
        return None
    return (
        f"{harness.get('name')} exit={harness.get('exit_status')} calls={harness.get('calls')} "
        f"segments={harness.get('segments')} merged={harness.get('merged_share')}"
    )


def view_of(record: Mapping[str, Any], index: int = 0) -> TrajectoryView:
    response = record.get("response") if isinstance(record.get("response"), Mapping) else {}
    params = record.get("responses_create_params") or {}
    prompt_input = params.get("input") if isinstance(params, Mapping) else None
    if isinstance(prompt_input, str):
        prompt = [Step("user", prompt_input)]
    else:
        prompt = [
            Step("system" if m.get("role") in ("system", "developer") else "user", _text(m.get("content")))
            for m in prompt_input or []
            if isinstance(m, Mapping)
        ]
    prorl = record.get("prorl") if isinstance(record.get("prorl"), Mapping) else {}
    turns = turns_of(list(response.get("output") or []))
    facts = {
        "task": record.get("data_source") or prorl.get("task") or "?",
        "task_id": record.get("task_id"),
        "reward": record.get("reward"),
        "reward_components": record.get("reward_components"),
        "stop_reason": prorl.get("stop_reason") or (response.get("metadata") or {}).get("stop_reason"),
        "turns": len(turns),
        "tool_calls": sum(t.tool_calls for t in turns),
        "tool_errors": record.get("tool_errors"),
        "generated_tokens": sum(t.generated_tokens for t in turns),
        "masked": record.get("mask_sample"),
        "failure": record.get("failure_reason"),
        "harness": _harness_fact(prorl.get("harness")),
    }
    return TrajectoryView(index, facts, prompt, turns)


def read_views(path: Path) -> Iterator[TrajectoryView]:
    """Every record of a trajectories JSONL; a clear error for a file that is not one."""
    if not path.is_file():
        raise TrajectoryFileError(f"{path}: no such file")
    with path.open() as fh:
        for number, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError as exc:
                raise TrajectoryFileError(f"{path}:{number}: not JSON ({exc})") from None
            if not isinstance(record, dict) or not isinstance(record.get("response"), Mapping):
                raise TrajectoryFileError(f"{path}:{number}: not a rollout record (no `response` object)")
            yield view_of(record, number)
