# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""A harness rollout's recorded model calls as NeMo Gym 0.7 token-capture records.

Why: Gym has its own training-token capture (`nemo_gym.token_id_capture`): one `TokenEntry` per
model call, parent links that its builder verifies by token-prefix digest, a `TokenSink` /
`TokenSource` transport (its `TokenCaptureStore` JSONL file store by default) and a consumer that
freezes a rollout, chains its calls and delivers one trajectory or masks the rollout. The
project's recording endpoint (`nemo_gym_prorl.llm.recording`) already holds every call a harness
made, token-exact, in segments. Writing those calls as Gym records lets Gym's own consumer (and
any trainer reading Gym's capture) train on a project harness rollout, with Gym's rules deciding
what is trainable instead of a second implementation of them.

How a `HarnessRecord` maps:

- one `TokenEntry` per recorded turn, ids and log-probs as the policy sampled them, the turn's
  text as its one assistant output item (`token_item_index=0`);
- a turn that extends its segment's previous turn: `RESOLVED`, that turn as `parent_call_id`
  (Gym re-verifies the link by digest of the child's prompt prefix);
- the rollout's first turn: `ROOT`; the first turn of every later segment: `UNRESOLVED` (the
  harness's history did not extend the previous segment, so no parent can be proven; Gym starts a
  fragment there and never joins tokens across it);
- the turn's policy version rides as an extra `policy_version` field: `TokenEntry` has none of
  its own (it allows extras; they round-trip through Gym's store);
- `created_at` is the call's position in the rollout, not a wall-clock time (the record has
  none): Gym uses it only to order chains, and a deterministic entry keeps a re-sent write
  byte-identical (Gym's sink contract: anything else is a conflict, not a retry).

A record the project itself would not train on as one sequence per segment (no turn, a log-prob
count that is not the id count, a segment whose turn does not extend the previous one) is refused
before anything is written. A sink write that fails marks the rollout incomplete, so Gym's
consumer masks it, and the error propagates.

The harness path writes the same entries as the calls are answered (`gym_capture`), through
the project's sink (`capture_store`); `write_harness_record` writes a finished record to any sink.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from nemo_gym.token_id_capture import (
    Chain,
    ParentResolutionStatus,
    TokenCaptureStore,
    TokenEntry,
    TokenSink,
    TokenSource,
    assert_prefix_contiguity,
    run_builder,
    stamp_lineage,
    trajectories_from_source,
    validate_rollout_id,
)
from nemo_gym.token_id_capture.builder import BuildOutput

from nemo_gym_prorl.llm.recording import HarnessRecord
from nemo_gym_prorl.llm.records import TurnRecord

# (prompt_ids, completion_ids, logprobs, env_mask): the shape the project's trainer builds
# (`rollouts/results.py::concatenate`), so the two can be compared directly.
Fields = tuple[list[int], list[int], list[float], list[int]]

# The reason a later segment's first call is unresolved (Gym treats it as a diagnostic string).
SEGMENT_BREAK_REASON = "harness_history_not_extended"


class HarnessRecordError(ValueError):
    """A harness record that cannot be written as Gym token records."""


def call_id(record: HarnessRecord, segment: int, position: int) -> str:
    """The Gym `model_call_id` of a segment's turn at `position` (unique within the rollout)."""
    return turn_call_id(record.trajectory_id, segment, position)


def turn_call_id(trajectory_id: str, segment: int, position: int) -> str:
    return f"{trajectory_id}-s{segment}-t{position}"


def token_entries(
    record: HarnessRecord, *, rollout_id: str, model: str, delta_prompts: bool = False
) -> list[TokenEntry]:
    """The record's turns as Gym `TokenEntry` records with lineage, in call order.

    `delta_prompts`: a resolved turn stores only the prompt suffix after its parent (Gym's delta
    storage; its builder rebuilds the full prompt through the parent chain and the digest).
    """
    try:
        validate_rollout_id(rollout_id)
    except ValueError as exc:
        raise HarnessRecordError(str(exc)) from None
    if not any(segment.tokens.turns for segment in record.segments):
        raise HarnessRecordError(f"harness record {record.trajectory_id!r} has no model call recorded")
    entries: list[TokenEntry] = []
    for segment in record.segments:
        parent: TokenEntry | None = None
        history: list[int] = []
        for position, turn in enumerate(segment.tokens.turns):
            where = f"segment {segment.index}, turn {position}"
            if len(turn.generation_token_ids) != len(turn.generation_log_probs):
                raise HarnessRecordError(
                    f"{where}: {len(turn.generation_token_ids)} generated ids but "
                    f"{len(turn.generation_log_probs)} log-probs"
                )
            if parent is not None and turn.prompt_token_ids[: len(history)] != history:
                raise HarnessRecordError(
                    f"{where}: its prompt ({len(turn.prompt_token_ids)} ids) does not extend the previous "
                    f"turn's prompt and generation ({len(history)} ids), yet the record merged it"
                )
            entry = turn_entry(
                turn,
                rollout_id=rollout_id,
                model_call_id=call_id(record, segment.index, position),
                model=model,
                parent=parent,
                history=history,
                order=len(entries),
                delta_prompt=delta_prompts,
            )
            history = [*turn.prompt_token_ids, *turn.generation_token_ids]
            entries.append(entry)
            parent = entry
    return entries


def turn_entry(
    turn: TurnRecord,
    *,
    rollout_id: str,
    model_call_id: str,
    model: str,
    parent: TokenEntry | None,
    history: list[int],
    order: int,
    delta_prompt: bool = False,
) -> TokenEntry:
    """One recorded turn as a Gym `TokenEntry` with its lineage: `RESOLVED` to `parent` (the
    segment's previous turn, whose prompt and generation are `history`), else `ROOT` for the
    rollout's first call (`order` 0) and `UNRESOLVED` for a later segment's first."""
    prompt = list(turn.prompt_token_ids)
    generation = list(turn.generation_token_ids)
    if parent is not None:
        status, reason = ParentResolutionStatus.RESOLVED, ""
    elif order == 0:
        status, reason = ParentResolutionStatus.ROOT, ""
    else:
        status, reason = ParentResolutionStatus.UNRESOLVED, SEGMENT_BREAK_REASON
    parent_id = parent.model_call_id if parent is not None else None
    delta = delta_prompt and parent is not None
    entry = TokenEntry(
        rollout_id=rollout_id,
        model_call_id=model_call_id,
        model=model,
        prompt_token_ids=prompt[len(history) :] if delta else prompt,
        generation_token_ids=generation,
        generation_log_probs=list(turn.generation_log_probs),
        output_items=[
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": turn.text}]}
        ],
        token_item_index=0,
        created_at=float(order),
        parent_call_id=parent_id,
        parent_resolution=status,
        parent_resolution_reason=reason,
        prompt_is_delta=delta,
        policy_version=turn.policy_version,
    )
    stamp_lineage(entry, parent_id, parent_resolution=status, cumulative=[*prompt, *generation])
    return entry


async def write_harness_record(
    record: HarnessRecord,
    *,
    rollout_id: str,
    model: str,
    sink: TokenSink | str | os.PathLike[str],
    delta_prompts: bool = False,
) -> list[TokenEntry]:
    """Write the record's turns through a Gym token sink; return the entries written.

    `sink`: any object satisfying Gym's `TokenSink` protocol, or a directory for Gym's own
    `TokenCaptureStore` (e.g. under the project's run directory). The whole record is validated
    before the first write; a write that fails marks the rollout incomplete, then re-raises.
    """
    entries = token_entries(record, rollout_id=rollout_id, model=model, delta_prompts=delta_prompts)
    target, owned = _sink(sink)
    try:
        for entry in entries:
            try:
                await target.put(entry)
            except Exception:
                await target.mark_incomplete(rollout_id, entry.model_call_id)
                raise
    finally:
        if owned:
            await target.close()
    return entries


@dataclass(frozen=True)
class GymRollout:
    """A rollout read back through Gym.

    `result`: Gym's consumer output (`trajectories_from_source`): `mask_sample`,
    `rebuilt_response` (the one delivered chain), `metrics`, `unresolved_parent_calls`...
    `build`: Gym's builder over the same frozen snapshot: every chain, not just the delivered one.
    """

    result: dict[str, Any]
    build: BuildOutput

    @property
    def mask_sample(self) -> bool:
        return bool(self.result.get("mask_sample"))

    @property
    def chains(self) -> list[Chain]:
        return self.build.chains


async def read_rollout(
    rollout_id: str,
    source: TokenSource | str | os.PathLike[str],
    *,
    model: str = "",
    terminal_call_id: str | None = None,
) -> GymRollout:
    """Freeze the rollout in a Gym token source (or a `TokenCaptureStore` directory) and build it
    with Gym's consumer. `terminal_call_id`: the call whose reply was scored (Gym's explicit
    terminal attribution); None: Gym's strict single-chain policy."""
    target: TokenSource = TokenCaptureStore(source) if isinstance(source, (str, os.PathLike)) else source
    result = await trajectories_from_source(
        rollout_id, target, model=model, explicit_terminal_call_id=terminal_call_id
    )
    if result is None:
        raise HarnessRecordError(f"Gym's consumer returned nothing for rollout {rollout_id!r}")
    snapshot = await target.freeze(rollout_id)  # idempotent: the snapshot the consumer built
    build = run_builder(list(snapshot.entries), terminal_call_id=terminal_call_id)
    return GymRollout(result=result, build=build)


def response_fields(response: dict[str, Any]) -> Fields:
    """The project's training fields of a Gym rebuilt response: its first generated item's prompt,
    then each item's new prompt tokens (mask 0, log-prob 0.0) and its generation (mask 1)."""
    assert_prefix_contiguity(response)
    items = [item for item in response.get("output", []) if item.get("generation_token_ids") is not None]
    if not items:
        raise HarnessRecordError("Gym's rebuilt response carries no generated tokens")
    parts = [
        (
            list(item["prompt_token_ids"]),
            list(item["generation_token_ids"]),
            list(item["generation_log_probs"]),
        )
        for item in items
    ]
    return _fields(parts)


def chain_fields(chain: Chain) -> Fields:
    """The project's training fields of one Gym chain (any chain, delivered or not)."""
    if not chain.links:
        raise HarnessRecordError(f"Gym chain {chain.chain_id!r} has no call")
    parts = []
    prompt = list(chain.root_prompt)
    for step, link in enumerate(chain.links):
        if step:
            prompt = [*prompt, *link.interstitial]
        generation = list(link.entry.generation_token_ids)
        parts.append((prompt, generation, list(link.entry.generation_log_probs)))
        prompt = [*prompt, *generation]
    return _fields(parts)


def _fields(parts: list[tuple[list[int], list[int], list[float]]]) -> Fields:
    prompt_ids = parts[0][0]
    completion: list[int] = []
    log_probs: list[float] = []
    mask: list[int] = []
    seen = prompt_ids
    for prompt, generation, generation_log_probs in parts:
        environment = prompt[len(seen) :]
        completion += [*environment, *generation]
        log_probs += [0.0] * len(environment) + generation_log_probs
        mask += [0] * len(environment) + [1] * len(generation)
        seen = [*prompt, *generation]
    return prompt_ids, completion, log_probs, mask


def _sink(sink: TokenSink | str | os.PathLike[str]) -> tuple[TokenSink, bool]:
    if isinstance(sink, (str, os.PathLike)):
        return TokenCaptureStore(sink), True
    if not isinstance(sink, TokenSink):
        raise TypeError(
            f"{type(sink).__name__} is not a Gym TokenSink (needs async put, mark_incomplete and close)"
        )
    return sink, False
