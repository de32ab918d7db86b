# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Start-up after a crash: take the dead service's jobs back from its journal, and remove what it
left behind.

    recover(service, durability)   journal opened (and locked), leftovers removed, finished
                                   results served again, jobs that were in flight queued again

What a `kill -9` leaves: its sandboxes' directories under the sandbox root (`<backend>-<id>`,
for SWE a repository copy each), their cgroups (`<owner pid>-<backend>-<id>`), and Apptainer
instances (`prorl-<owner pid>-<id>`). Bubblewrap's processes die with their parent. Only what the
project made for an owner that is gone is removed: a directory is taken only when a cgroup of
the same sandbox names an owner that is gone, so a live service's sandboxes on the same root are
never touched (a dead owner whose pid another process took since is not known to be gone: those
are left, as `reap_orphan_cgroups` leaves their cgroups).
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import shutil
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from nemo_gym_prorl.pipeline import DuplicateJobError, JobSpec, Pipeline, UnknownTaskError
from nemo_gym_prorl.sandbox.apptainer import reap_orphan_instances
from nemo_gym_prorl.sandbox.limits import pid_alive, reap_orphan_cgroups, writable_controllers
from nemo_gym_prorl.service.journal import Journal, JournalStore

logger = logging.getLogger(__name__)

# A sandbox's cgroup: `<owner pid>-<backend>-<sandbox id>` (sandbox/base.py names it so).
_SANDBOX_CGROUP = re.compile(r"^(?P<pid>\d+)-(?P<dir>(?P<backend>[a-z_]+)-(?P<id>[0-9a-f]{12}))$")


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


def dead_sandbox_dirs(previous_pids: Iterable[int], cgroup_parents: Iterable[Path]) -> list[str]:
    """Names of the sandbox directories (`<backend>-<id>`) whose owner is gone, read from the
    names of their cgroups: an owner pid that is dead, or this process's own pid when the
    journal's dead service had it (a container restarted gives its service the same pid; this
    one has opened no sandbox yet). A previous pid alive in another process is that process's:
    its sandboxes are left alone."""
    previous = set(previous_pids)
    names: dict[str, None] = {}
    for parent in cgroup_parents:
        try:
            children = list(parent.iterdir())
        except OSError:
            continue
        for child in children:
            match = _SANDBOX_CGROUP.match(child.name)
            if match is None:
                continue
            pid = int(match["pid"])
            if (pid == os.getpid() and pid in previous) or (pid != os.getpid() and not pid_alive(pid)):
                names[match["dir"]] = None
    return list(names)


def remove_leftovers(previous_pids: list[int], sandbox_root: Path, backend: str) -> Recovered:
    """Remove the dead services' sandbox directories, cgroups and Apptainer instances. Blocking
    (tree removal, `apptainer instance stop`): run it off the event loop."""
    done = Recovered(previous_pids=previous_pids)
    for name in dead_sandbox_dirs(previous_pids, dict.fromkeys(writable_controllers().values())):
        path = sandbox_root / name
        if path.is_dir() and not path.is_symlink():
            try:
                shutil.rmtree(path)
                done.removed_dirs.append(name)
            except OSError as exc:
                logger.warning("could not remove a dead service's sandbox %s: %s", path, exc)
    done.removed_cgroups = reap_orphan_cgroups()  # after the names above were read from them
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
