# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""A harness rollout's record (its conversation, commands and token segments) as the built-in
loop's `AgentTrajectory`: what the trainer gets from it, and what it does not (and why)."""

from __future__ import annotations

from typing import Any

from nemo_gym_prorl.agent.harness.base import HarnessRun, SandboxCommands
from nemo_gym_prorl.agent.harness.token_capture import turn_call_id
from nemo_gym_prorl.agent.loop import AgentLimits, AgentTrajectory, StopReason
from nemo_gym_prorl.llm.recording import HarnessRecord, SegmentRecord
from nemo_gym_prorl.llm.records import TrajectoryTokens, TurnRecord
from nemo_gym_prorl.rollouts.delivery import TokenDelivery


def agent_trajectory(
    run: HarnessRun,
    record: HarnessRecord,
    commands: SandboxCommands,
    limits: AgentLimits,
    *,
    seconds: float,
    timed_out: bool,
    delivery: TokenDelivery | None = None,
) -> AgentTrajectory:
    """The harness's rollout in the built-in loop's record: its conversation, every command as
    a tool step, the token sequence the scorer saw, and what NeMo Gym's builder delivers of it.

    The scored sequence (`scored`) is the one the harness finished with: its last segment's
    replies that sit in its final history. `delivery` is Gym's build of the rollout's capture
    records with that sequence's last call as the terminal (`agent.harness.gym_capture`):
    the chain it delivers is the rollout's sample for a trainer that takes one per rollout (NeMo
    RL's `/run` rows; TRL with one slot per rollout); where that chain starts at a call with no
    proven parent (the harness broke the token chain before the scored reply), Gym masks the
    rollout, with the reason, and so does every trainer. Every chain Gym found is in
    `harness["token_segments"]` with its ids and log-probs, for a trainer that takes each as its
    own sample (TRL with `segment_slots` above one: `integrations.trl.fields`)."""
    stop: StopReason = run.stop_reason
    failure = next((s.tokens.failure for s in record.segments if s.tokens.failure), None)
    if failure is not None and failure.infrastructure:
        stop = "infrastructure_error"
    elif timed_out:
        stop = "time_budget"
    elif stop != "submitted" and len(record.calls) >= limits.max_turns:
        stop = "max_turns"
    delivered, kept, run = scored(run, record)
    turns = [t for _, _, t in kept] if kept else (delivered.tokens.turns if delivered else [])
    generated = sum(len(t.generation_token_ids) for t in record.turns)
    tokens = TrajectoryTokens(
        trajectory_id=record.trajectory_id,
        dialect=delivered.tokens.dialect if delivered else "vllm",
        turns=turns,
        reroutes=[r for s in record.segments for r in s.tokens.reroutes],
        finish_reason=turns[-1].finish_reason if turns else None,
        context_exhausted=any(s.tokens.context_exhausted for s in record.segments),
        failure=failure,
        http_attempts=sum(s.tokens.http_attempts for s in record.segments),
        http_retries=sum(s.tokens.http_retries for s in record.segments),
        policy_versions=list(dict.fromkeys(t.policy_version for t in record.turns)),
    )
    harness: dict[str, Any] = {
        "name": run.name,
        "exit_status": run.exit_status,
        "calls": len(record.calls),
        "segments": len(record.segments),
        "merged_share": record.merged_share,
        "delivered_share": _delivered_share(delivery, kept, generated),
        "delivered_segment": delivered.index if delivered is not None else None,
        "token_segments": _token_segments(record, delivery),
    }
    if delivery is not None:
        harness["undelivered"] = dict(delivery.undelivered)
        harness["capture"] = delivery.model_dump(mode="json")
    return AgentTrajectory(
        tokens=tokens,
        steps=list(commands.steps),
        stop_reason=stop,
        final_answer=run.submission,
        messages=run.messages,
        num_turns=len(record.turns),
        generated_tokens=generated,
        duration_s=seconds,
        reply_positions=[p for p, _, _ in kept],
        harness=harness,
    )


Kept = list[tuple[int, int, TurnRecord]]  # (the reply's index in the messages, its call's position, turn)


def scored(run: HarnessRun, record: HarnessRecord) -> tuple[SegmentRecord | None, Kept, HarnessRun]:
    """The segment the harness finished with and its replies that sit in its final history (each
    reply follows the messages its call sent; a reply the harness did not keep, one it answered
    with a format error and then stopped, is not scored), and the run.

    A harness that kept none of its last segment's replies (mini-swe-agent answers each reply
    without exactly one bash block with a format error and drops it) would leave nothing scored,
    and a policy that never gets the format right would never be told so. Its scored reply is
    then its first, to the task as the harness opened it: the root of the rollout's lineage, so
    every sample of a group starts from the same prompt, as GRPO needs. Gym's builder delivers
    that root call alone and leaves out the later calls (each the same failure, from a history
    the harness rewrote); the run's messages become the opening and that reply."""
    delivered = record.segments[-1] if record.segments else None
    if delivered is None:
        return None, [], run
    calls = [c for c in record.calls if c.segment == delivered.index]
    kept = _kept([c.messages for c in calls], delivered.tokens.turns, run.messages)
    if delivered.tokens.turns and not kept:
        first = record.segments[0]
        opening = next(c for c in record.calls if c.segment == first.index).messages
        if len(run.messages) >= opening:
            turn = first.tokens.turns[0]
            reply = {"role": "assistant", "content": turn.text}
            run = run.model_copy(update={"messages": [*run.messages[:opening], reply]})
            return first, [(opening, 0, turn)], run
    return delivered, kept, run


def scored_call_id(run: HarnessRun, record: HarnessRecord) -> str | None:
    """The Gym model call id of the reply the scorer saw (the terminal of Gym's build)."""
    delivered, kept, _ = scored(run, record)
    if delivered is None or not kept:
        return None
    return turn_call_id(record.trajectory_id, delivered.index, kept[-1][1])


def _kept(positions: list[int], turns: list[TurnRecord], messages: list[dict[str, Any]]) -> Kept:
    """The turns whose replies sit in `messages` where their calls put them."""
    return [
        (p, index, t)
        for index, (p, t) in enumerate(zip(positions, turns, strict=True))
        if p < len(messages) and messages[p].get("role") == "assistant"
    ]


def _delivered_share(delivery: TokenDelivery | None, kept: Kept, generated: int) -> float | None:
    """Of what the policy generated, the share a trainer gets: Gym's delivered chain (0.0 for a
    masked rollout: its `undelivered` says why)."""
    if not generated:
        return None
    if delivery is not None:
        return delivery.delivered_tokens / generated
    return sum(len(t.generation_token_ids) for _, _, t in kept) / generated


def _token_segments(record: HarnessRecord, delivery: TokenDelivery | None) -> list[list[dict[str, Any]]]:
    """Every token sequence as Gym's builder chained it (root first), each turn's token fields;
    without a delivery, the record's own segments."""
    fields = {"prompt_token_ids", "generation_token_ids", "generation_log_probs", "decoding"}
    if delivery is None:
        return [[t.model_dump(include=fields) for t in s.tokens.turns] for s in record.segments]
    by_call = {
        turn_call_id(record.trajectory_id, s.index, position): turn
        for s in record.segments
        for position, turn in enumerate(s.tokens.turns)
    }
    return [[by_call[call].model_dump(include=fields) for call in chain] for chain in delivery.chains]
