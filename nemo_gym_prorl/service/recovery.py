# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Start-up after a crash: take the dead service's jobs back from its journal, and remove what it
left behind.

    recover(service, durability)   journal opened (and locked), leftovers removed, finished
                                   results served again, jobs that were in flight queued again

What a `kill -9` leaves: its sandboxes' directories under the sandbox root (`<owner pid>-<id>`,
for SWE a repository copy each), their cgroups (`<owner pid>-<backend>-<id>`), and Apptainer
instances (`prorl-<owner pid>-<id>`). Bubblewrap's processes die with their parent. Which of them
are a dead owner's is `sandbox/leftovers.py`'s to say (any process that opens sandboxes removes
them too); start-up adds the journal's previous owners, whose pid may be this process's own.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections import defaultdict
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from nemo_gym_prorl.pipeline import DuplicateJobError, JobSpec, Pipeline, UnknownTaskError
from nemo_gym_prorl.sandbox.apptainer import reap_orphan_instances
from nemo_gym_prorl.sandbox.leftovers import remove_dead_owners_leftovers
from nemo_gym_prorl.service.journal import Journal, JournalStore

logger = logging.getLogger(__name__)


class Durability(BaseModel):
    """What a stack needs to survive its own death: where its journal is, and where its
    sandboxes live (to clean up after a dead predecessor)."""

    model_config = ConfigDict(extra="forbid")

    journal: Path
    keep_results: int = Field(10_000, ge=1)
    restore_max_bytes: int = Field(1 << 30, ge=0)
    sandbox_root: Path
    sandbox_backend: str = "bubblewrap"


class Recovered(BaseModel):
    """What a start-up found and did (logged, and kept on the stack for status and tests)."""

    previous_pids: list[int] = Field(default_factory=list)
    restored_results: int = 0
    evicted_results: int = 0
    resumed_jobs: int = 0
    removed_dirs: list[str] = Field(default_factory=list)
    removed_cgroups: list[str] = Field(default_factory=list)
    stopped_instances: list[str] = Field(default_factory=list)


def remove_leftovers(previous_pids: list[int], sandbox_root: Path, backend: str) -> Recovered:
    """Remove the dead services' sandbox directories, cgroups and Apptainer instances. Blocking
    (tree removal, `apptainer instance stop`): run it off the event loop."""
    removed = remove_dead_owners_leftovers(sandbox_root, previous_pids)
    done = Recovered(previous_pids=previous_pids, **removed.model_dump())
    if backend == "apptainer":
        done.stopped_instances = reap_orphan_instances()
    return done


def _resubmit(pipeline: Pipeline, specs: list[JobSpec], runs: int) -> int:
    """Queue the jobs again; one the service can no longer run (its task was configured away)
    is logged and left unfinished in the journal, for a service that has the task."""
    try:
        return len(pipeline.submit(specs, resumed=runs))
    except (UnknownTaskError, DuplicateJobError):
        queued = 0
        for spec in specs:
            try:
                queued += len(pipeline.submit([spec], resumed=runs))
            except (UnknownTaskError, DuplicateJobError) as exc:
                logger.warning("journaled job %s cannot run here: %s", spec.id, exc)
        return queued


async def recover(pipeline: Pipeline, durability: Durability) -> tuple[Journal, Recovered]:
    """Open the journal, clean up after the service that used it before, serve its finished
    results again and queue its unfinished jobs once more; from then on the pipeline journals
    every job it accepts and every result. Call after the pipeline started, before serving."""
    journal = await Journal.open(durability.journal, keep_results=durability.keep_results)
    try:
        previous = await journal.read(JournalStore.add_owner, journal.store, os.getpid())
        done = await asyncio.to_thread(
            remove_leftovers, previous, durability.sandbox_root, durability.sandbox_backend
        )
        results, evicted = await journal.read(
            JournalStore.finished,
            journal.store,
            pipeline.config.max_retained_results,
            durability.restore_max_bytes,
            pipeline.config.max_retained_bytes,
        )
        pipeline.restore_results(results, reversed(evicted[: pipeline.config.max_evicted_ids]))
        done.restored_results, done.evicted_results = len(results), len(evicted)
        pipeline.journal = journal
        unfinished = await journal.read(JournalStore.unfinished, journal.store)
        by_runs: dict[int, list[JobSpec]] = defaultdict(list)
        for job in unfinished:
            by_runs[job.runs].append(job.spec)
        for runs, specs in sorted(by_runs.items(), reverse=True):  # the oldest losses first
            done.resumed_jobs += _resubmit(pipeline, specs, runs)
        await journal.flush()
    except BaseException:
        await journal.close()
        raise
    logger.info(
        "journal %s: %d results restored, %d jobs run again; removed %d sandbox directories, "
        "%d cgroups, %d Apptainer instances of pids %s",
        durability.journal,
        done.restored_results,
        done.resumed_jobs,
        len(done.removed_dirs),
        len(done.removed_cgroups),
        len(done.stopped_instances),
        previous,
    )
    return journal, done
