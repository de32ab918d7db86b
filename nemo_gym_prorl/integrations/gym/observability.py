# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""NeMo Gym 0.7's rollout observability for the prorl agent.

Gym builds its canonical `ng_trajectory` (and from it the rollout health checks, `ng_perf` and the
ATIF export) from what the agent sends with its `/run` result and from the model calls captured
under `model_call_capture_dir`. Gym's model servers capture the calls that pass through them;
this agent calls vLLM directly (token-in/token-out), so it observes its own calls.

With Gym's `observability_enabled` on (our configs and `prorl gym up` turn it on) the `/run`
result carries the agent's own `ng_trajectory`: the invocation, one turn per model call, every
model call (token counts, finish reason, latency, the generated items) and every tool call (timing,
status, output). The rollout is then observed whatever the collector's own settings: its health
checks, `ng_perf` and the ATIF export read that record, and nothing has to be captured on the node
that ran the rollout (with the Ray executor, RUN runs on a rollout actor elsewhere and these
observations come back with its result). The calls are also appended to Gym's `CaptureStore`,
keyed by the rollout id Gym derives from the `/run` body, for Gym's capture-based tools. The agent
numbers each turn's `step_count` cumulatively, tool calls of that turn included, which is what
Gym's ATIF exporter checks (Gym 0.7's own projection from captured calls counts only the earlier
turns' calls, so it cannot export a tool-using rollout; ours is exported as is).

With observability off the result carries only the light `ng_agent_observations` bundle (the
invocation with its conversation and model-call references, tool timings).

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
from typing import Any, Literal

from nemo_gym.rollout_correlation import maybe_rollout_id_from_run_body
from nemo_gym.rollout_observability import (
    AgentInvocation,
    AgentObservationBundle,
    ModelCallRef,
    ToolCallObservation,
    TrajectoryModelCall,
    TrajectoryRecord,
    TrajectoryResponseMetadata,
    TrajectoryTokenStats,
    TrajectoryToolCall,
    TrajectoryTurn,
)

from nemo_gym_prorl.agent.handler import PROPER_ENDS
from nemo_gym_prorl.agent.loop import AgentTrajectory
from nemo_gym_prorl.integrations.gym.response import TOKEN_FIELDS, tool_output_item, turn_items
from nemo_gym_prorl.llm.records import TurnRecord
from nemo_gym_prorl.pipeline import JobResult

SOURCE = "nemo_gym_prorl"

# The agent's stop reasons in Gym's invocation vocabulary: a finished episode, one that failed,
# one cut by a budget.
_FAILED = frozenset({"infrastructure_error", "model_error"})


InvocationStatus = Literal["completed", "failed", "incomplete"]


def invocation_status(stop_reason: str) -> InvocationStatus:
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
    # The conversation is Responses-API items as JSON: validated into Gym's item models here.
    invocation = AgentInvocation.model_validate(
        {
            "invocation_id": invocation_id,
            "status": status,
            "duration_ms": agent.duration_s * 1000.0,
            "error_type": None if status == "completed" else agent.stop_reason,
            "model_calls": refs,
            "conversation": conversation,
        }
    )
    bundle = AgentObservationBundle.model_validate(
        {"source": SOURCE, "records": [invocation.model_dump(mode="json", exclude_none=True), *tools]}
    )
    return {"bundle": bundle.model_dump(mode="json", exclude_none=True), "model_calls": exchanges}


def capture_dir(global_config: Mapping[str, Any]) -> Path | None:
    """Gym's run-wide capture directory, when `observability_enabled` is on."""
    # Imported here: Gym's model-server module imports anthropic's types (about 1.5 s), which
    # only a run that captures model calls needs.
    from nemo_gym.base_responses_api_model import model_call_capture_dirs_from_config

    dirs = model_call_capture_dirs_from_config(
        {
            k: global_config[k]
            for k in ("observability_enabled", "model_call_capture_dir")
            if k in global_config
        }
    )
    return dirs[0] if dirs else None


def _record(directory: Path, rollout_id: str, exchanges: Sequence[Mapping[str, Any]]) -> None:
    from nemo_gym.base_responses_api_model import CaptureStore

    store = CaptureStore(directory)
    for exchange in exchanges:
        store.record(rollout_id, dict(exchange))


def rollout_id_of(row: Mapping[str, Any]) -> str | None:
    """Gym's rollout id of a `/run` body; None without one (or with one Gym would refuse)."""
    try:
        return maybe_rollout_id_from_run_body(dict(row))
    except ValueError:
        return None


def rollout_identity(row: Mapping[str, Any], fallback: str) -> tuple[str, str]:
    """(task_id, rollout_id) as Gym's collector names the rollout of this `/run` body, so that
    our record and its canonical one agree."""
    task_index = row.get("_ng_task_index")
    task_id = next(
        (str(row[key]) for key in ("task_id", "problem_id", "instance_id") if row.get(key) is not None),
        str(task_index) if task_index is not None else fallback,
    )
    rollout_id = rollout_id_of(row)
    if rollout_id is None:
        rollout_index = row.get("_ng_rollout_index")
        both = task_index is not None and rollout_index is not None
        rollout_id = f"{task_index}-{rollout_index}" if both else fallback
    return task_id, rollout_id


def trajectory_record(
    row: Mapping[str, Any], observed: Mapping[str, Any], *, resolved: bool | None = None
) -> dict[str, Any]:
    """The agent's own `ng_trajectory` (Gym's `TrajectoryRecord`) from `observe_agent`'s output:
    one turn per model call, its question the conversation before it, `step_count` the tool calls
    made so far including this turn's. A call's request is that same question, so the record does
    not repeat it."""
    bundle = AgentObservationBundle.model_validate(observed["bundle"])
    invocations = [r for r in bundle.records if isinstance(r, AgentInvocation)]
    (invocation,) = invocations
    task_id, rollout_id = rollout_identity(row, invocation.invocation_id)
    outputs = {
        item.call_id: item.output
        for item in invocation.conversation
        if getattr(item, "type", None) == "function_call_output"
    }
    tools = [
        TrajectoryToolCall(**record.model_dump(exclude_none=True), output=outputs.get(record.tool_call_id))
        for record in bundle.records
        if isinstance(record, ToolCallObservation)
    ]
    turns: list[TrajectoryTurn] = []
    calls: list[TrajectoryModelCall] = []
    steps = 0
    for number, exchange in enumerate(observed["model_calls"], start=1):
        response = exchange["response"]
        generated = response["output"]
        reasoning = [item for item in generated if item.get("type") == "reasoning"]
        answer = [item for item in generated if item.get("type") != "reasoning"]
        steps += sum(1 for item in answer if item.get("type") == "function_call")
        ref = ModelCallRef(model_call_id=exchange["model_call_id"])
        turns.append(
            TrajectoryTurn(
                invocation_id=invocation.invocation_id,
                task_id=task_id,
                rollout_id=rollout_id,
                turn_no=number,
                timestamp=exchange["started_at"],
                question=exchange["request"]["input"],
                answer=answer,
                reasoning_content=reasoning or None,
                step_count=steps,
                model_calls=[ref],
            )
        )
        usage = response["usage"]
        calls.append(
            TrajectoryModelCall(
                model_call_id=exchange["model_call_id"],
                started_at=exchange["started_at"],
                completed_at=exchange["completed_at"],
                duration_ms=exchange["latency_ms"],
                response=response,
                response_metadata=TrajectoryResponseMetadata(
                    response_id=response["id"],
                    model=response["model"],
                    dialect=exchange["dialect"],
                    status_code=exchange["status_code"],
                    response_status=response["status"],
                    finish_reason=response["stop_reason"],
                ),
                token_stats=TrajectoryTokenStats(
                    prompt_tokens=usage["input_tokens"],
                    completion_tokens=usage["output_tokens"],
                    total_tokens=usage["total_tokens"],
                ),
            )
        )
    if turns and resolved is not None:
        turns[-1] = turns[-1].model_copy(update={"resolved": resolved})
    record = TrajectoryRecord(
        task_id=task_id,
        rollout_id=rollout_id,
        invocations=invocations,
        turns=turns,
        model_calls=calls,
        tool_calls=tools,
    )
    return record.model_dump(mode="json", exclude_none=True)


async def publish(
    row: Mapping[str, Any], result: JobResult, body: dict[str, Any], directory: Path | None
) -> dict[str, Any]:
    """Attach the agent's observations to a `/run` body: with observability on (`directory`, Gym's
    capture directory) its `ng_trajectory`, and its model calls recorded in the capture store;
    otherwise the `ng_agent_observations` bundle alone."""
    observed = result.trajectory.observations if result.trajectory is not None else None
    if not isinstance(observed, Mapping):
        return body
    if directory is None:
        body["ng_agent_observations"] = observed["bundle"]
        return body
    resolved = body.get("resolved")
    body["ng_trajectory"] = trajectory_record(
        row, observed, resolved=resolved if isinstance(resolved, bool) else None
    )
    rollout_id = rollout_id_of(row)
    if rollout_id and observed.get("model_calls"):
        # fsync per exchange (Gym's durability contract): off the event loop.
        await asyncio.to_thread(_record, directory, rollout_id, observed["model_calls"])
    return body
