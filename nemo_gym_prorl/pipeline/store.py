# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Bounded retention of finished results, so memory stays flat however many jobs pass through.

Live (non-terminal) jobs are never evicted; their number is bounded by the stage queues and
pools. A finished result is held as its JSON (`result_json`), parsed again when fetched: a
result's token ids and log-probs as Python objects took several times their JSON, and every pass
of the garbage collector walked each list of them, with the event loop stopped (hundreds of
milliseconds per pass with a few thousand results held). Bytes are neither: they cost their
length, which is exactly what the byte budget counts. Finished results are kept up to two
budgets: `max_results` of them and `max_bytes` of their JSON. Beyond either, the oldest
*fetched* one goes first, then the oldest unfetched one. A result bigger than the whole
byte budget is still kept (a fetch that comes at once gets it) but goes before any other: the
next result stored pushes it out.

Evicted ids are remembered (ids, the budget that pushed each out and its digest; bounded too).
Where a journal holds every settled result, an evicted one is *spilled*: the pipeline reads it
back from the journal when it is fetched. Otherwise a late fetch gets "evicted" (410), naming the
budget and the setting to raise, rather than a puzzling "unknown" (404).
"""

from __future__ import annotations

import sys
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, TypeAdapter

from nemo_gym_prorl.pipeline.job import JobResult

Budget = Literal["count", "bytes"]

SETTINGS: dict[Budget, str] = {
    "count": "pipeline.max_retained_results",
    "bytes": "pipeline.max_retained_bytes",
}

# Lists longer than this are sized from a sample of their items: token ids and log-probs come
# in lists of tens of thousands, and walking each item would cost as much as serialising them.
_SAMPLED_LIST = 64
_SAMPLE = 16


def memory_size(value: Any) -> int:
    """About how many bytes `value` holds in this process, its containers walked (long lists
    sized from evenly spaced items, so it costs well under a millisecond on the event loop). What a memory budget must count: in memory a rollout's
    result takes several times its JSON, every token id being an int object and a list slot.
    Shared objects (small ints, None, interned keys) are counted as if not shared: an estimate
    from above."""
    kind = type(value)
    if kind is dict:  # its keys are mostly field names every result shares: not counted
        return sys.getsizeof(value) + sum(memory_size(item) for item in value.values())
    if kind is list or kind is tuple:
        count = len(value)
        if count <= _SAMPLED_LIST:
            return sys.getsizeof(value) + sum(memory_size(item) for item in value)
        step = count / _SAMPLE
        sampled = sum(memory_size(value[int(i * step)]) for i in range(_SAMPLE))
        return sys.getsizeof(value) + sampled * count // _SAMPLE
    if isinstance(value, BaseModel):
        size = sys.getsizeof(value) + memory_size(value.__dict__)
        extra = value.__pydantic_extra__
        return size + memory_size(extra) if extra else size
    return sys.getsizeof(value)


_RESULT = TypeAdapter(JobResult)


def result_json(result: JobResult) -> bytes:
    """A finished result as the store holds it (and as a client gets it): its JSON."""
    return _RESULT.dump_json(result)


@dataclass(slots=True)
class _Held:
    """A finished result in memory: its JSON, and its digest (asked on every resubmission)."""

    digest: str | None
    json: bytes


@dataclass(slots=True)
class Tombstone:
    """What is remembered of an evicted result."""

    budget: Budget | None  # the budget that pushed it out; None: not known (a previous run's)
    digest: str | None  # what was submitted under the id, so a resubmission is recognised
    spilled: bool  # a journal holds it: a fetch reads it back from there
    pruned: bool = False  # it was spilled, and the journal has pruned it since


class JobNotFoundError(LookupError):
    def __init__(
        self,
        job_id: str,
        *,
        evicted: bool,
        budget: Budget | None = None,
        limit: int | None = None,
        pruned: bool = False,
    ) -> None:
        self.job_id = job_id
        self.evicted = evicted
        self.budget = budget
        if evicted:
            msg = f"job {job_id!r} finished and its result was evicted " + _why(budget, limit)
            if pruned:
                msg += "; the journal it was spilled to has pruned it since (raise journal.keep_results)"
        else:
            msg = f"no job with id {job_id!r} (never submitted, or evicted long ago)"
        super().__init__(msg)


def _why(budget: Budget | None, limit: int | None) -> str:
    if budget is None:
        return (
            "(retention cap reached); fetch results sooner or raise "
            f"{SETTINGS['count']} or {SETTINGS['bytes']}"
        )
    held = f"{limit} results" if budget == "count" else f"{limit} bytes of results"
    return (
        f"to keep finished results within {SETTINGS[budget]} ({held} held in memory); fetch "
        f"results sooner, raise {SETTINGS[budget]}, or keep a journal (a service with one reads "
        "evicted results back from it)"
    )


class ResultStore:
    def __init__(
        self,
        max_results: int,
        max_tombstones: int,
        max_bytes: int = 2 << 30,
        *,
        spills: Callable[[], bool] = lambda: False,
    ) -> None:
        """`spills`: whether an evicted result can be read back later (a journal holds every
        settled result); asked at each eviction, since a journal may be attached after start."""
        if max_results < 1:
            raise ValueError("max_results must be >= 1")
        if max_bytes < 1:
            raise ValueError("max_bytes must be >= 1")
        self.max_results = max_results
        self.max_tombstones = max_tombstones
        self.max_bytes = max_bytes
        self.spills = spills
        # Insertion order = finish order; three lanes, evicted in turn: results bigger than the
        # whole byte budget, then fetched ones, then unfetched ones.
        self._oversize: OrderedDict[str, _Held] = OrderedDict()
        self._fetched: OrderedDict[str, _Held] = OrderedDict()
        self._unfetched: OrderedDict[str, _Held] = OrderedDict()
        self._sizes: dict[str, int] = {}
        self._tombstones: OrderedDict[str, Tombstone] = OrderedDict()
        self.bytes = 0
        self.evicted_total = 0  # pushed out of memory, spilled or not
        self.spilled_total = 0  # of those, the ones a journal still serves

    def __len__(self) -> int:
        return len(self._oversize) + len(self._fetched) + len(self._unfetched)

    def __contains__(self, job_id: str) -> bool:
        return job_id in self._sizes

    def size(self, job_id: str) -> int | None:
        return self._sizes.get(job_id)

    def put(self, result: JobResult, size: int | None = None) -> bytes:
        """Keep a finished result as its JSON (which is returned), evicting older ones until both
        budgets hold it. `size`: what it counts against the byte budget (its JSON's length
        unless given)."""
        data = result_json(result)
        size = len(data) if size is None else size
        self._tombstones.pop(result.id, None)
        self._discard(result.id)  # the same id stored again replaces the old result
        oversize = size > self.max_bytes
        # An oversize result claims no room: it alone would empty the store, and it is the next
        # to go anyway.
        self._make_room(0 if oversize else size)
        (self._oversize if oversize else self._unfetched)[result.id] = _Held(result.digest, data)
        self._sizes[result.id] = size
        self.bytes += size
        return data

    def _make_room(self, size: int) -> None:
        while self:
            if len(self) + 1 > self.max_results:
                budget: Budget = "count"
            elif self.bytes + size > self.max_bytes:
                budget = "bytes"
            else:
                return
            lane = self._oversize or self._fetched or self._unfetched
            old_id, old = lane.popitem(last=False)
            self.bytes -= self._sizes.pop(old_id)
            spilled = self.spills()
            self._bury(old_id, Tombstone(budget, old.digest, spilled))
            self.evicted_total += 1
            self.spilled_total += spilled

    def _discard(self, job_id: str) -> None:
        for lane in (self._oversize, self._fetched, self._unfetched):
            if lane.pop(job_id, None) is not None:
                self.bytes -= self._sizes.pop(job_id)
                return

    def get(self, job_id: str, *, mark_fetched: bool = True) -> JobResult | None:
        """The held result (parsed from its JSON), or None."""
        held = self._held(job_id, mark_fetched)
        return None if held is None else JobResult.model_validate_json(held.json)

    def get_json(self, job_id: str, *, mark_fetched: bool = True) -> bytes | None:
        """The held result's JSON as it is kept, or None."""
        held = self._held(job_id, mark_fetched)
        return None if held is None else held.json

    def digest(self, job_id: str) -> str | None:
        """The digest of the held result's job (None: not held, or submitted without one)."""
        held = self._unfetched.get(job_id) or self._fetched.get(job_id) or self._oversize.get(job_id)
        return None if held is None else held.digest

    def _held(self, job_id: str, mark_fetched: bool) -> _Held | None:
        held = self._unfetched.get(job_id)
        if held is not None:
            if mark_fetched:
                # Fetched results keep their finish-order position among fetched ones.
                del self._unfetched[job_id]
                self._fetched[job_id] = held
            return held
        return self._fetched.get(job_id) or self._oversize.get(job_id)

    def tombstone(self, job_id: str) -> Tombstone | None:
        return self._tombstones.get(job_id)

    def was_evicted(self, job_id: str) -> bool:
        return job_id in self._tombstones

    def spilled(self, job_id: str) -> bool:
        """Evicted from memory, and a journal holds it."""
        tomb = self._tombstones.get(job_id)
        return tomb is not None and tomb.spilled

    def mark_lost(self, job_id: str) -> None:
        """The journal no longer holds a spilled result (it prunes its oldest): answer 410."""
        tomb = self._tombstones.get(job_id)
        if tomb is not None:
            tomb.spilled, tomb.pruned = False, True

    def not_found(self, job_id: str) -> JobNotFoundError:
        """The error a fetch of an id neither live nor held gets."""
        tomb = self._tombstones.get(job_id)
        if tomb is None:
            return JobNotFoundError(job_id, evicted=False)
        limit = (
            None if tomb.budget is None else self.max_results if tomb.budget == "count" else self.max_bytes
        )
        return JobNotFoundError(job_id, evicted=True, budget=tomb.budget, limit=limit, pruned=tomb.pruned)

    def remember_evicted(self, job_id: str, *, spilled: bool = False, digest: str | None = None) -> None:
        self._bury(job_id, Tombstone(None, digest, spilled))

    def forget_tombstone(self, job_id: str) -> None:
        self._tombstones.pop(job_id, None)

    def _bury(self, job_id: str, tomb: Tombstone) -> None:
        self._tombstones.pop(job_id, None)  # re-inserted: the newest is forgotten last
        self._tombstones[job_id] = tomb
        if len(self._tombstones) > self.max_tombstones:
            self._tombstones.popitem(last=False)
