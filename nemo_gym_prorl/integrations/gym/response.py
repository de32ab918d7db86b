# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""From an agent trajectory to the NeMo Gym `/run` result: Responses-API output items with token
fields, and the tools of a Gym row in the shape the agent's prompt uses.

One model turn becomes, in order: an assistant `message` (its prose, when there is any or when it
called no tool), one `function_call` per tool call it made (well-formed or not), then one
`function_call_output` per answer. Every item the model generated carries the three token fields
(`prompt_token_ids`, `generation_token_ids`, `generation_log_probs`), so Gym validates it as its
`...ForTraining` variant; the turn's ids sit on its LAST generated item and the items before it
carry empty lists. That is the layout Gym's own `vllm_model` produces (ids on the last item of a
model call) and the one NeMo RL reads: it skips items whose `generation_token_ids` is empty and
asserts that each turn's prompt starts with everything seen before. Tool outputs carry no ids.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

from nemo_gym_prorl.agent.loop import AgentTrajectory, ToolStep
from nemo_gym_prorl.llm.records import TurnRecord

TOKEN_FIELDS = ("prompt_token_ids", "generation_token_ids", "generation_log_probs")

# Why a trajectory ended early, in the Responses API's own vocabulary.
_INCOMPLETE = {
    "context_length": "max_output_tokens",
    "length": "max_output_tokens",
    "token_budget": "max_output_tokens",
    "max_turns": "max_output_tokens",
    "time_budget": "max_output_tokens",
}


def chat_tool_specs(row: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The row's tools (`responses_create_params.tools`, Responses-API function tools) as OpenAI
    chat function specs `{"type": "function", "function": {name, description, parameters}}`.
    Non-function tools are ignored. Deterministic: the first prompt depends only on the row."""
    params = row.get("responses_create_params") or {}
    out: list[dict[str, Any]] = []
    for tool in params.get("tools") or []:
        if not isinstance(tool, Mapping):
            continue
        function = tool.get("function")
        fn: Mapping[str, Any] = function if isinstance(function, Mapping) else tool
        if tool.get("type", "function") != "function" or not isinstance(fn.get("name"), str):
            continue
        spec = {"name": fn["name"], "description": fn.get("description") or ""}
        spec["parameters"] = fn.get("parameters") or {"type": "object", "properties": {}}
        out.append({"type": "function", "function": spec})
    return out


def _token_fields(turn: TurnRecord | None) -> dict[str, list[Any]]:
    if turn is None:
        return {"prompt_token_ids": [], "generation_token_ids": [], "generation_log_probs": []}
    return {
        "prompt_token_ids": list(turn.prompt_token_ids),
        "generation_token_ids": list(turn.generation_token_ids),
        "generation_log_probs": list(turn.generation_log_probs),
    }


def turn_items(turn: TurnRecord, trajectory_id: str) -> list[dict[str, Any]]:
    """The items one model call generated, token fields on the last one."""
    items: list[dict[str, Any]] = []
    content = turn.content if (turn.tool_calls or turn.tool_call_errors) else (turn.content or turn.text)
    if content.strip() or not (turn.tool_calls or turn.tool_call_errors):
        items.append(
            {
                "id": f"msg_{trajectory_id}_{turn.turn}",
                "type": "message",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": content, "annotations": []}],
            }
        )
    for error in turn.tool_call_errors:
        items.append(
            {
                "id": error.id,
                "call_id": error.id,
                "type": "function_call",
                "name": error.name or "invalid_tool_call",
                "arguments": error.raw,
                "status": "incomplete",
            }
        )
    for call in turn.tool_calls:
        items.append(
            {
                "id": call.id,
                "call_id": call.id,
                "type": "function_call",
                "name": call.name,
                "arguments": json.dumps(call.arguments, ensure_ascii=False),
                "status": "completed",
            }
        )
    for i, item in enumerate(items):
        item.update(_token_fields(turn if i == len(items) - 1 else None))
    return items


def tool_output_item(step: ToolStep) -> dict[str, Any]:
    return {
        "id": f"fco_{step.call_id}",
        "type": "function_call_output",
        "call_id": step.call_id,
        "output": step.observation,
        "status": "completed",
    }


def output_items(
    turns: Sequence[TurnRecord], steps: Sequence[ToolStep], trajectory_id: str
) -> list[dict[str, Any]]:
    """All output items of a trajectory, in conversation order."""
    by_turn: dict[int, list[ToolStep]] = {}
    for step in steps:
        by_turn.setdefault(step.turn, []).append(step)
    items: list[dict[str, Any]] = []
    for turn in turns:
        if not turn.generation_token_ids:  # context full: nothing was generated this turn
            continue
        items.extend(turn_items(turn, trajectory_id))
        items.extend(tool_output_item(step) for step in by_turn.get(turn.turn, []))
    return items


def gym_response(
    agent: AgentTrajectory,
    *,
    row: Mapping[str, Any],
    model: str,
    created_at: float | None = None,
) -> dict[str, Any]:
    """The `response` object of a Gym verify request/result (`NeMoGymResponse` as JSON)."""
    tokens = agent.tokens
    items = output_items(tokens.turns, agent.steps, tokens.trajectory_id)
    params = row.get("responses_create_params") or {}
    # Summed over the model calls, as Gym's own agents accumulate usage (and as its rollout
    # health check compares it with the captured calls).
    input_tokens = sum(len(t.prompt_token_ids) for t in tokens.turns if t.generation_token_ids)
    reason = _INCOMPLETE.get(agent.stop_reason)
    return {
        "id": f"resp_{tokens.trajectory_id}",
        "object": "response",
        "created_at": float(created_at if created_at is not None else time.time()),
        "model": model,
        "output": items,
        "parallel_tool_calls": bool(params.get("parallel_tool_calls", True)),
        "tool_choice": params.get("tool_choice") or "auto",
        "tools": list(params.get("tools") or []),
        "temperature": params.get("temperature"),
        "top_p": params.get("top_p"),
        "status": "incomplete" if reason else "completed",
        "incomplete_details": {"reason": reason} if reason else None,
        "metadata": {"stop_reason": agent.stop_reason, "trajectory_id": tokens.trajectory_id},
        "usage": {
            "input_tokens": input_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": agent.generated_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": input_tokens + agent.generated_tokens,
        },
    }
