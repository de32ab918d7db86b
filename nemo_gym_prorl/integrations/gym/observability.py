# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""NeMo Gym 0.7's rollout observability for the prorl agent.

Gym builds its canonical `ng_trajectory` (and from it the rollout health checks, `ng_perf` and the
ATIF export) from two sources: the agent's `ng_agent_observations` (an `AgentObservationBundle`:
the invocation with its conversation and model-call references, tool calls) and the model calls
captured under `model_call_capture_dir` when `observability_enabled` is on. Gym's model servers
capture the calls that pass through them; this agent calls vLLM directly (token-in/token-out), so
it is itself the capture point: after each rollout it appends one exchange per model call to Gym's
own `CaptureStore`, keyed by the rollout id Gym derives from the `/run` body, and the bundle
references those calls by `model_call_id`. Gym then joins them exactly as it joins its own.

Wall-clock timestamps of calls and tool executions are rebuilt from the measured per-call
latencies and tool durations, laid back to back from the start of RUN (the agent loop is
sequential); durations are measured, start times are exact up to the loop's bookkeeping.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from nemo_gym.base_responses_api_model import CaptureStore, model_call_capture_dirs_from_config
from nemo_gym.rollout_correlation import maybe_rollout_id_from_run_body
from nemo_gym.rollout_observability import (
    AgentInvocation,
    AgentObservationBundle,
    ModelCallRef,
    ToolCallObservation,
)

from nemo_gym_prorl.agent.handler import PROPER_ENDS
from nemo_gym_prorl.agent.loop import AgentTrajectory
from nemo_gym_prorl.integrations.gym.response import TOKEN_FIELDS, tool_output_item, turn_items
from nemo_gym_prorl.llm.records import TurnRecord
from nemo_gym_prorl.pipeline import JobResult

SOURCE = "nemo_gym_prorl"
EXTRA_KEY = "ng_observations"  # where the RUN stage leaves them on the pipeline's trajectory

# The agent's stop reasons in Gym's invocation vocabulary: a finished episode, one that failed,
# one cut by a budget.
_FAILED = frozenset({"infrastructure_error", "model_error"})


def invocation_status(stop_reason: str) -> str:
    if stop_reason in PROPER_ENDS:
        return "completed"
    return "failed" if stop_reason in _FAILED else "incomplete"


def _conversation_item(message: Mapping[str, Any]) -> dict[str, Any]:
    return {"type": "message", "role": message["role"], "content": message.get("content") or ""}


def finish_reason(turn: TurnRecord) -> str:
    """vLLM's finish reason as its chat endpoint reports it: a generation that ended on EOS after
    tool-call markup is `tool_calls` (the completions endpoint we use cannot know that)."""
    if turn.finish_reason == "stop" and (turn.tool_calls or turn.tool_call_errors):
        return "tool_calls"
    return str(turn.finish_reason)


def _untokenized(item: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in item.items() if k not in TOKEN_FIELDS}


def observe_agent(
    agent: AgentTrajectory, *, model: str, run_started_at: float | None = None
) -> dict[str, Any]:
    """The bundle and the model-call exchanges of one finished agent loop, as JSON.

    `run_started_at` (Unix seconds) defaults to now minus the loop's duration: call this right
    after the loop returns."""
    tokens = agent.tokens
    invocation_id = tokens.trajectory_id
    start = run_started_at if run_started_at is not None else time.time() - agent.duration_s
    steps_by_turn: dict[int, list[Any]] = {}
    for step in agent.steps:
        steps_by_turn.setdefault(step.turn, []).append(step)

    # The conversation in Responses-API items: the first prompt's messages, then each call's
    # generated items and tool outputs; call k's request input is everything before its items.
    first = itertools.takewhile(lambda m: m.get("role") != "assistant", agent.messages)
    conversation: list[dict[str, Any]] = [_conversation_item(m) for m in first]

    exchanges: list[dict[str, Any]] = []
    tools: list[dict[str, Any]] = []
    refs: list[ModelCallRef] = []
    cursor = start
    for turn in tokens.turns:
        started, cursor = cursor, cursor + turn.latency_s
        if turn.generation_token_ids:  # a turn with a full context made no call
            call_id = f"{invocation_id}-call-{turn.turn}"
            refs.append(ModelCallRef(model_call_id=call_id))
            prompt = len(turn.prompt_token_ids)
            generated = len(turn.generation_token_ids)
            truncated = turn.finish_reason == "length"
            exchanges.append(
                {
                    "model_call_id": call_id,
                    "client_session_id": invocation_id,
                    "dialect": turn.dialect,
                    "status_code": 200,
                    "started_at": started,
                    "completed_at": cursor,
                    "latency_ms": turn.latency_s * 1000.0,
                    "request": {"model": model, "input": list(conversation)},
                    "response": {
                        "id": f"resp_{call_id}",
                        "object": "response",
                        "created_at": started,
                        "model": model,
                        "status": "incomplete" if truncated else "completed",
                        "incomplete_details": {"reason": "max_output_tokens"} if truncated else None,
                        "output": [_untokenized(item) for item in turn_items(turn, invocation_id)],
                        # Gym's call record reads the finish reason from here first.
                        "stop_reason": finish_reason(turn),
                        "usage": {
                            "input_tokens": prompt,
                            "output_tokens": generated,
                            "total_tokens": prompt + generated,
                        },
                    },
                }
            )
            conversation += [_untokenized(item) for item in turn_items(turn, invocation_id)]
        for step in steps_by_turn.get(turn.turn, []):
            if turn.generation_token_ids:
                conversation.append(tool_output_item(step))
            tool_started, cursor = cursor, cursor + step.duration_s
            tools.append(
                ToolCallObservation(
                    invocation_id=invocation_id,
                    tool_call_id=step.call_id,
                    tool_name=step.name,
                    started_at=tool_started,
                    completed_at=cursor,
                    duration_ms=step.duration_s * 1000.0,
                    timing_source="harness",
                    status="failed" if step.is_error else "completed",
                    error_type="tool_error" if step.is_error else None,
                ).model_dump(mode="json", exclude_none=True)
            )

    status = invocation_status(agent.stop_reason)
    invocation = AgentInvocation(
        invocation_id=invocation_id,
        status=status,  # type: ignore[arg-type]
        duration_ms=agent.duration_s * 1000.0,
        error_type=None if status == "completed" else agent.stop_reason,
        model_calls=refs,
        conversation=conversation,  # type: ignore[arg-type]
    )
    bundle = AgentObservationBundle.model_validate(
        {"source": SOURCE, "records": [invocation.model_dump(mode="json", exclude_none=True), *tools]}
    )
    return {"bundle": bundle.model_dump(mode="json", exclude_none=True), "model_calls": exchanges}


def capture_dir(global_config: Mapping[str, Any]) -> Path | None:
    """Gym's run-wide capture directory, when `observability_enabled` is on."""
    dirs = model_call_capture_dirs_from_config(
        {
            k: global_config[k]
            for k in ("observability_enabled", "model_call_capture_dir")
            if k in global_config
        }
    )
    return dirs[0] if dirs else None


def _record(directory: Path, rollout_id: str, exchanges: Sequence[Mapping[str, Any]]) -> None:
    store = CaptureStore(directory)
    for exchange in exchanges:
        store.record(rollout_id, dict(exchange))


async def publish(
    row: Mapping[str, Any], result: JobResult, body: dict[str, Any], directory: Path | None
) -> dict[str, Any]:
    """Attach the bundle to a `/run` body and, when Gym captures model calls, record ours."""
    observed = result.trajectory.observations if result.trajectory is not None else None
    if not isinstance(observed, Mapping):
        return body
    body["ng_agent_observations"] = observed["bundle"]
    rollout_id = maybe_rollout_id_from_run_body(row) if directory is not None else None
    if directory is not None and rollout_id and observed.get("model_calls"):
        # fsync per exchange (Gym's durability contract): off the event loop.
        await asyncio.to_thread(_record, directory, rollout_id, observed["model_calls"])
    return body
