# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""What the pipeline tells a durable journal: each job it accepts and each result as it settles.

Both calls are made on the event loop, in the order things happen, and must not block: a journal
queues them for a writer of its own (the service's is `service/journal.py`). Whoever answers a
client for accepted jobs waits for the journal's flush first. Since the journal holds every
settled result, the pipeline evicts results from memory without losing them: `result` reads one
back (off the event loop).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from nemo_gym_prorl.pipeline.job import Job, JobResult


class JobJournal(Protocol):
    def accepted(self, jobs: Sequence[Job], *, resumed: int = 0) -> None:
        """Jobs just queued (`resumed`: taken back from the journal after a crash, not new)."""
        ...

    def settled(self, result: JobResult, as_json: bytes | None = None) -> None:
        """A job's terminal result, once (`as_json`: its JSON, as the pipeline holds it, so the
        journal need not make it again)."""
        ...

    async def result(self, job_id: str) -> JobResult | None:
        """A settled result read back (after every write queued before it); None when the
        journal does not hold it (never settled here, or pruned as the oldest)."""
        ...
