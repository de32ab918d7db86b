# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""A harness rollout's NeMo Gym token capture, written as it runs and built by Gym when it ends.

Each call the recording endpoint answers is written as a Gym `TokenEntry` before the harness gets
the reply (Gym's serving contract: the record is durable before the response), with its lineage:
`ROOT` for the rollout's first call, `RESOLVED` to the previous call of its token sequence,
`UNRESOLVED` where the harness's history no longer extended the last sequence (`token_capture`).
When the harness ends, the rollout is frozen and built by Gym's own consumer and builder, with
the call whose reply the scorer saw as the terminal (Gym's explicit terminal attribution):

- the terminal's chain runs back to the rollout's root: Gym delivers that chain; calls off it
  (replies the harness dropped, calls after the scored reply) are left out and counted;
- the chain starts at an unresolved call (the harness broke the token chain before the scored
  reply), or a record was lost: Gym masks the rollout, and so does every trainer of the project,
  with the reason. NeMo RL's `/run` shape (one contiguous sequence per result) masks it too.

The outcome (`rollouts.delivery.TokenDelivery`) travels in the rollout's result with the records
themselves, so the project's trainer and any Gym consumer read one record. A capture error never
fails the model call (Gym's contract): the rollout is marked incomplete and Gym masks it.
"""

from __future__ import annotations

import asyncio
import logging
import re
import uuid

from nemo_gym.token_id_capture import TokenCaptureSnapshot, TokenEntry, run_builder, trajectories_from_source
from nemo_gym.token_id_capture.builder import BuildOutput

from nemo_gym_prorl.agent.harness.capture_store import CaptureStore
from nemo_gym_prorl.agent.harness.token_capture import (
    HarnessRecordError,
    response_fields,
    turn_call_id,
    turn_entry,
)
from nemo_gym_prorl.llm.records import TurnRecord
from nemo_gym_prorl.rollouts.delivery import OFF_CHAIN, DeliveredFields, TokenDelivery

log = logging.getLogger(__name__)

BROKEN_CHAIN = "the harness broke the token chain"
INCOMPLETE = "token capture incomplete"


def attempt_rollout_id(trajectory_id: str) -> str:
    """A Gym rollout id for one attempt of a rollout: what Gym's stores accept (letters, digits,
    `._-`), unique per attempt, so a requeued rollout never shares records with its last try."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", trajectory_id)[:80] or "rollout"
    return f"{safe}-{uuid.uuid4().hex[:8]}"


class HarnessCapture:
    """One attempt of one harness rollout, written to `store` as its calls are answered.

    `write` is the recording session's turn hook; `deliver` builds the rollout with Gym when the
    harness has ended and forgets its records; `discard` forgets them for an attempt that failed."""

    def __init__(self, store: CaptureStore, *, trajectory_id: str, model: str) -> None:
        self.store = store
        self.trajectory_id = trajectory_id
        self.rollout_id = attempt_rollout_id(trajectory_id)
        self.model = model
        self.calls = 0
        self._last: dict[int, tuple[TokenEntry, list[int]]] = {}  # segment -> its last entry and history

    async def write(self, segment: int, position: int, turn: TurnRecord) -> None:
        call = turn_call_id(self.trajectory_id, segment, position)
        parent, history = self._last.get(segment, (None, []))
        order, self.calls = self.calls, self.calls + 1
        try:
            if parent is not None and turn.prompt_token_ids[: len(history)] != history:
                raise HarnessRecordError(f"{call}: its prompt does not extend its segment's last call")
            # Delta prompts: a resolved call stores only what its prompt adds (Gym's builder
            # rebuilds the rest through the parent), so the records stay the size of the sequence.
            # Built off the event loop: stamping hashes the whole sequence.
            entry = await asyncio.to_thread(
                turn_entry,
                turn,
                rollout_id=self.rollout_id,
                model_call_id=call,
                model=self.model,
                parent=parent,
                history=history,
                order=order,
                delta_prompt=True,
            )
            await self.store.put(entry)
        except Exception as exc:  # a capture error never fails the model call: the rollout is masked
            log.warning("token capture of %s failed (%s): the rollout will be masked", call, exc)
            await self.store.mark_incomplete(self.rollout_id, call)
            return
        self._last[segment] = (entry, [*turn.prompt_token_ids, *turn.generation_token_ids])

    async def deliver(self, terminal_call_id: str | None) -> TokenDelivery:
        """Freeze the rollout, build it with Gym's consumer (terminal attribution) and builder (every
        chain), and forget its records: they travel in the delivery from here on."""
        try:
            result = await trajectories_from_source(
                self.rollout_id, self.store, model=self.model, explicit_terminal_call_id=terminal_call_id
            )
            snapshot = await self.store.freeze(self.rollout_id)  # idempotent: the one the consumer built
            build = await asyncio.to_thread(
                run_builder, list(snapshot.entries), terminal_call_id=terminal_call_id
            )
        finally:
            self.discard()
        return delivery(result or {}, build, snapshot, terminal_call_id)

    def discard(self) -> None:
        self.store.discard(self.rollout_id)


def delivery(
    result: dict, build: BuildOutput, snapshot: TokenCaptureSnapshot, terminal_call_id: str | None
) -> TokenDelivery:
    """The delivery of a rollout from Gym's consumer `result` and builder output."""
    generated = sum(len(entry.generation_token_ids) for entry in snapshot.entries)
    roots = sorted(
        (chain.links for chain in build.chains if chain.links),
        key=lambda links: (links[0].entry.created_at, links[0].entry.model_call_id),
    )
    chains = [[link.entry.model_call_id for link in links] for links in roots]
    common = {
        "rollout_id": snapshot.rollout_id,
        "terminal_call_id": terminal_call_id,
        "chains": chains,
        "generated_tokens": generated,
        "metrics": result.get("metrics", {}),
        "entries": [entry.model_dump(mode="json") for entry in snapshot.entries],
    }
    reason = None if not result.get("mask_sample") else mask_reason(result, len(chains))
    response = result.get("rebuilt_response")
    if reason is not None or response is None:
        reason = reason or "Gym's consumer delivered no response"
        return TokenDelivery(**common, mask_reason=reason, undelivered={reason.split(":")[0]: generated})
    prompt_ids, completion_ids, logprobs, env_mask = response_fields(response)
    main = next(chain for chain in build.chains if chain.chain_id == "main")
    delivered = sum(env_mask)
    return TokenDelivery(
        **common,
        delivered_calls=[link.entry.model_call_id for link in main.links],
        fields=DeliveredFields(
            prompt_ids=prompt_ids, completion_ids=completion_ids, logprobs=logprobs, env_mask=env_mask
        ),
        delivered_tokens=delivered,
        undelivered={OFF_CHAIN: generated - delivered} if generated > delivered else {},
    )


def mask_reason(result: dict, chains: int) -> str:
    """Why Gym's consumer masked a rollout, in words a step report can count (before the colon)."""
    metrics = result.get("metrics", {})
    terminal = metrics.get("terminal_attribution", {}).get("chain")
    if metrics.get("capture_incomplete"):
        return f"{INCOMPLETE}: a call's record was lost, and Gym never trains a chain with a hole"
    if terminal == "broken":
        return (
            f"{BROKEN_CHAIN}: the scored reply's chain starts at a call whose prompt did not extend the one "
            f"before ({chains} token sequences); Gym's builder and NeMo RL's /run mask such a rollout"
        )
    if terminal == "not_captured":
        return f"{INCOMPLETE}: the scored reply's call has no record"
    if result.get("error"):
        return f"Gym's builder failed: {result['error']}"
    unresolved = len(result.get("unresolved_parent_calls", []))
    return f"Gym's consumer masked it: {chains} chains, {unresolved} unresolved parent calls"
