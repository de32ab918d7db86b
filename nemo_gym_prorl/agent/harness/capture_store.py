# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The project's NeMo Gym token sink and source: where a harness rollout's calls are written as
Gym `TokenEntry` records while the harness runs, and frozen and built when it ends.

Why not Gym's `TokenCaptureStore`: that is a JSONL file store with an fsync per write, a state file
per rollout and tombstones that stay until swept. A harness rollout's records live only as long
as its RUN stage: they are written as the calls are answered, built into the rollout's samples by
Gym's builder when the harness ends, carried in the rollout's result (which the service journals)
and retired. Held in memory and bounded in bytes, they cost no disk round trip per model call, and
a crash loses them together with the rollout they belong to, which is requeued with a fresh
attempt (an attempt-scoped rollout id: Gym's sanctioned strategy for retirement).

The store keeps Gym's contracts (`nemo_gym.token_id_capture.protocols`), checked by Gym's own
`run_conformance` in the tests: a `put` is visible to every client of the same store when it
returns; a byte-identical re-put is a no-op and a conflicting one raises and marks the rollout
incomplete; `mark_incomplete` always lands and moves the version, after a freeze too; `freeze` is
idempotent; a write after a freeze is refused; `drop` retires only the exact snapshot consumed.
Instances share one `CaptureBackend` (Gym's "fresh clients over one shared backend"); one service
process holds one backend, and its event loop is the only writer, so no lock is needed.
"""

from __future__ import annotations

import json
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field

from nemo_gym.token_id_capture import TokenCaptureSnapshot, TokenEntry

# About 40 harness_swe rollouts' worth of records at once (each call's full prompt: a few
# thousand ids of ~6 bytes of JSON), far above what a service's RUN pool holds in flight.
DEFAULT_MAX_BYTES = 256 * 1024 * 1024
# Retired rollouts keep a tombstone (a late writer of that attempt must still see the freeze);
# the oldest are forgotten past this many.
MAX_TOMBSTONES = 10_000


class CaptureFull(RuntimeError):
    """The store's byte bound would be passed: the write is refused (the rollout is then marked
    incomplete and masked, never trained on with a hole)."""


@dataclass
class _Rollout:
    # model call id -> (its canonical bytes, the entry)
    entries: dict[str, tuple[bytes, TokenEntry]] = field(default_factory=dict)
    incomplete: list[str] = field(default_factory=list)  # the calls whose capture failed
    frozen: bool = False
    retired: bool = False
    snapshot_id: str = ""
    version: int = 0

    @property
    def size(self) -> int:
        return sum(len(payload) for payload, _ in self.entries.values())


class CaptureBackend:
    """The records of one service process, by rollout id, bounded in bytes."""

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self.rollouts: OrderedDict[str, _Rollout] = OrderedDict()

    def rollout(self, rollout_id: str) -> _Rollout:
        state = self.rollouts.get(rollout_id)
        if state is None:
            state = self.rollouts[rollout_id] = _Rollout()
        return state

    def forget_retired(self) -> None:
        retired = [rid for rid, state in self.rollouts.items() if state.retired]
        for rollout_id in retired[: max(0, len(retired) - MAX_TOMBSTONES)]:
            del self.rollouts[rollout_id]

    def discard(self, rollout_id: str) -> None:
        """Forget a rollout whose attempt ended without being built (failed or cancelled)."""
        state = self.rollouts.pop(rollout_id, None)
        if state is not None:
            self.bytes -= state.size


def canonical(entry: TokenEntry) -> bytes:
    """The entry's bytes as Gym's sink contract compares them (a retry resends the same bytes)."""
    return json.dumps(entry.model_dump(mode="json"), sort_keys=True, separators=(",", ":")).encode()


class CaptureStore:
    """A client of a `CaptureBackend`: Gym's `TokenSink` and `TokenSource` in one."""

    def __init__(self, backend: CaptureBackend | None = None) -> None:
        self.backend = backend or CaptureBackend()

    # -- TokenSink --------------------------------------------------------------------------------

    async def put(self, entry: TokenEntry) -> None:
        state = self.backend.rollout(entry.rollout_id)
        if state.retired or state.frozen:
            raise RuntimeError(f"token capture for rollout {entry.rollout_id!r} is already frozen")
        payload = canonical(entry)
        existing = state.entries.get(entry.model_call_id)
        if existing is not None:
            if existing[0] == payload:
                return  # a retry of the same write
            self._poison(state, entry.model_call_id)
            raise ValueError(
                f"model call id {entry.model_call_id!r} was reused with a different payload "
                f"for rollout {entry.rollout_id!r}"
            )
        if self.backend.bytes + len(payload) > self.backend.max_bytes:
            raise CaptureFull(
                f"token capture holds {self.backend.bytes} bytes; {len(payload)} more would pass its bound "
                f"of {self.backend.max_bytes}"
            )
        state.entries[entry.model_call_id] = (payload, entry.model_copy(deep=True))
        self.backend.bytes += len(payload)
        state.version += 1

    async def mark_incomplete(self, rollout_id: str, model_call_id: str = "") -> None:
        self._poison(self.backend.rollout(rollout_id), model_call_id)

    @staticmethod
    def _poison(state: _Rollout, model_call_id: str) -> None:
        state.incomplete.append(model_call_id)
        state.version += 1  # a retirement of the snapshot taken before this must now fail

    # -- TokenSource ------------------------------------------------------------------------------

    async def freeze(self, rollout_id: str) -> TokenCaptureSnapshot:
        state = self.backend.rollout(rollout_id)
        if state.retired:
            raise RuntimeError(f"token capture for rollout {rollout_id!r} is retired")
        if not state.frozen:
            state.frozen = True
            state.snapshot_id = uuid.uuid4().hex
            state.version += 1
        return TokenCaptureSnapshot(
            rollout_id=rollout_id,
            entries=tuple(entry.model_copy(deep=True) for _, entry in state.entries.values()),
            incomplete=bool(state.incomplete),
            snapshot_id=state.snapshot_id,
            version=state.version,
        )

    async def drop(self, rollout_id: str, *, snapshot_id: str, version: int) -> bool:
        state = self.backend.rollouts.get(rollout_id)
        if state is None or not state.frozen or state.snapshot_id != snapshot_id or state.version != version:
            return False
        self.backend.bytes -= state.size
        state.entries.clear()
        state.incomplete.clear()
        state.retired = True
        self.backend.forget_retired()
        return True

    async def close(self) -> None:
        """Nothing to flush: a `put` that returned is already visible to every client."""

    # -- for the owner ----------------------------------------------------------------------------

    def discard(self, rollout_id: str) -> None:
        self.backend.discard(rollout_id)

    @property
    def bytes(self) -> int:
        return self.backend.bytes
