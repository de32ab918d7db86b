# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""A harness rollout's record (its conversation, commands and token segments) as the built-in
loop's `AgentTrajectory`: what the trainer gets from it, and what it does not."""

from __future__ import annotations

from typing import Any

from nemo_gym_prorl.agent.harness.base import HarnessRun, SandboxCommands
from nemo_gym_prorl.agent.loop import AgentLimits, AgentTrajectory, StopReason
from nemo_gym_prorl.llm.recording import HarnessRecord
from nemo_gym_prorl.llm.records import TrajectoryTokens, TurnRecord


def agent_trajectory(
    run: HarnessRun,
    record: HarnessRecord,
    commands: SandboxCommands,
    limits: AgentLimits,
    *,
    seconds: float,
    timed_out: bool,
) -> AgentTrajectory:
    """The harness's rollout in the built-in loop's record: its conversation, every command as
    a tool step, and the token sequence that ends it.

    That sequence (the last segment) is the rollout's sample for a trainer that takes one per
    rollout (NeMo RL's `/run` rows; TRL with one slot per rollout): it is the conversation the
    harness finished with, which the reward is about, and `delivered_share` says how much of what
    the policy generated it holds. A harness whose history only grows has one segment. Every
    segment, complete (a reply it dropped after a format error, a history it summarised), is in
    `harness["token_segments"]` with its ids and log-probs, for a trainer that takes each as its
    own sample (TRL with `segment_slots` above one: `integrations.trl.fields`). A harness that
    kept none of its last segment's replies (mini-swe-agent answers each reply without one bash
    block with a format error and drops it) would leave no sample at all, and a policy that never
    gets the format right would never be told so: its sample is then its first reply, to the task
    as the harness opened it (so every sample of a group starts from the same prompt, as GRPO
    needs), with the rollout's reward."""
    stop: StopReason = run.stop_reason
    failure = next((s.tokens.failure for s in record.segments if s.tokens.failure), None)
    if failure is not None and failure.infrastructure:
        stop = "infrastructure_error"
    elif timed_out:
        stop = "time_budget"
    elif stop != "submitted" and len(record.calls) >= limits.max_turns:
        stop = "max_turns"
    delivered = record.segments[-1] if record.segments else None
    turns = delivered.tokens.turns if delivered else []
    calls = [c for c in record.calls if delivered is not None and c.segment == delivered.index]
    # Each reply follows the messages its call sent; a reply the harness did not keep in its
    # final history (one it answered with a format error, then stopped) is not delivered.
    positions = [c.messages for c in calls]
    kept = _kept(positions, turns, run.messages)
    if turns and not kept:
        first = record.segments[0]
        opening = next(c for c in record.calls if c.segment == first.index).messages
        if len(run.messages) >= opening:
            delivered, turns = first, first.tokens.turns[:1]
            reply = {"role": "assistant", "content": turns[0].text}
            run = run.model_copy(update={"messages": [*run.messages[:opening], reply]})
            kept = [(opening, turns[0])]
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
    if len(kept) < len(turns):
        tokens = tokens.model_copy(update={"turns": [t for _, t in kept]})
    return AgentTrajectory(
        tokens=tokens,
        steps=list(commands.steps),
        stop_reason=stop,
        final_answer=run.submission,
        messages=run.messages,
        num_turns=len(record.turns),
        generated_tokens=generated,
        duration_s=seconds,
        reply_positions=[p for p, _ in kept],
        harness={
            "name": run.name,
            "exit_status": run.exit_status,
            "calls": len(record.calls),
            "segments": len(record.segments),
            "merged_share": record.merged_share,
            "delivered_share": (sum(len(t.generation_token_ids) for _, t in kept) / generated)
            if generated
            else None,
            "delivered_segment": delivered.index if delivered is not None else None,
            "token_segments": [
                [
                    t.model_dump(
                        include={
                            "prompt_token_ids",
                            "generation_token_ids",
                            "generation_log_probs",
                            "decoding",
                        }
                    )
                    for t in s.tokens.turns
                ]
                for s in record.segments
            ],
        },
    )


def _kept(
    positions: list[int], turns: list[TurnRecord], messages: list[dict[str, Any]]
) -> list[tuple[int, TurnRecord]]:
    """The turns whose replies sit in `messages` where their calls put them."""
    return [
        (p, t)
        for p, t in zip(positions, turns, strict=True)
        if p < len(messages) and messages[p].get("role") == "assistant"
    ]
