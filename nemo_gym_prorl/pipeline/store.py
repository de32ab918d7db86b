# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Bounded retention of finished results, so memory stays flat however many jobs pass through.

Live (non-terminal) jobs are never evicted; their number is bounded by the stage queues and
pools. Finished results are kept up to `max_results`; beyond that the oldest *fetched* one goes
first, then the oldest unfetched one. Evicted ids are remembered (ids only, also bounded) so a
late fetch gets "evicted" (410) rather than a puzzling "unknown" (404).
"""

from __future__ import annotations

from collections import OrderedDict

from nemo_gym_prorl.pipeline.job import JobResult


class JobNotFoundError(LookupError):
    def __init__(self, job_id: str, *, evicted: bool) -> None:
        self.job_id = job_id
        self.evicted = evicted
        if evicted:
            msg = (
                f"job {job_id!r} finished and its result was evicted (retention cap reached); "
                "fetch results sooner or raise pipeline.max_retained_results"
            )
        else:
            msg = f"no job with id {job_id!r} (never submitted, or evicted long ago)"
        super().__init__(msg)


class ResultStore:
    def __init__(self, max_results: int, max_tombstones: int) -> None:
        if max_results < 1:
            raise ValueError("max_results must be >= 1")
        self.max_results = max_results
        self.max_tombstones = max_tombstones
        # Insertion order = finish order; two lanes so fetched results are evicted first.
        self._fetched: OrderedDict[str, JobResult] = OrderedDict()
        self._unfetched: OrderedDict[str, JobResult] = OrderedDict()
        self._tombstones: OrderedDict[str, None] = OrderedDict()
        self.evicted_total = 0

    def __len__(self) -> int:
        return len(self._fetched) + len(self._unfetched)

    def __contains__(self, job_id: str) -> bool:
        return job_id in self._fetched or job_id in self._unfetched

    def put(self, result: JobResult) -> None:
        self._tombstones.pop(result.id, None)
        self._unfetched[result.id] = result
        while len(self) > self.max_results:
            lane = self._fetched or self._unfetched
            old_id, _ = lane.popitem(last=False)
            self._tombstones[old_id] = None
            self.evicted_total += 1
            if len(self._tombstones) > self.max_tombstones:
                self._tombstones.popitem(last=False)

    def get(self, job_id: str, *, mark_fetched: bool = True) -> JobResult | None:
        result = self._unfetched.get(job_id)
        if result is not None:
            if mark_fetched:
                # Fetched results keep their finish-order position among fetched ones.
                del self._unfetched[job_id]
                self._fetched[job_id] = result
            return result
        return self._fetched.get(job_id)

    def was_evicted(self, job_id: str) -> bool:
        return job_id in self._tombstones

    def remember_evicted(self, job_id: str) -> None:
        self._tombstones[job_id] = None
        if len(self._tombstones) > self.max_tombstones:
            self._tombstones.popitem(last=False)

    def forget_tombstone(self, job_id: str) -> None:
        self._tombstones.pop(job_id, None)
