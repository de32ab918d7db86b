# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The service's durable journal: every accepted job and every finished result, in SQLite (WAL).

A `kill -9` must not lose what the service acknowledged. A job is written before its 202 is
answered; a result when it settles, once (a second record of the same id is ignored: the first
stands). A service restarted on the same file serves the finished results again and runs the jobs
that were in flight once more, counting the lost run (`JobResult.resumed`).

    JournalStore   the SQLite file itself: synchronous, used from one thread only
    Journal        the event loop's side: calls queue their writes for one writer thread, which
                   commits them in batches; `flush()` waits until what was queued is on disk

The event loop never touches SQLite: results are serialised and compressed in the writer thread
too (a SWE result is megabytes). The file stays bounded: results past `keep_results` (the oldest
first) are pruned with their jobs, as the service's memory forgets them.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import logging
import os
import sqlite3
import time
import zlib
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field

from nemo_gym_prorl.pipeline.job import Budget, Job, JobResult, JobSpec
from nemo_gym_prorl.pipeline.store import result_json

logger = logging.getLogger(__name__)

SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    job TEXT NOT NULL,            -- the job as accepted (JSON), to run it again
    runs INTEGER NOT NULL DEFAULT 1,
    accepted_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS results (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    body BLOB NOT NULL,           -- the JobResult, JSON, zlib-compressed
    finished_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS batches (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    request TEXT NOT NULL,        -- the batch request (JSON), to resume it
    created_at REAL NOT NULL,
    ended INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS judged (
    group_id TEXT PRIMARY KEY,    -- a DAPO group delivered or dropped by a batch
    batch_id TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS owners (
    pid INTEGER NOT NULL,
    started_at REAL NOT NULL
);
"""


class JournalConfig(BaseModel):
    """Where the journal lives. `auto`: `$PRORL_HOME/service/journal-<port>.sqlite3`, so that a
    service restarted on its address takes its own jobs back; with `server.port=0` (a port chosen
    at random, which no client can find again after a restart) `auto` keeps no journal."""

    model_config = ConfigDict(extra="forbid")

    path: str | None = Field(
        "auto", description="The SQLite file; `auto` (see above), or null / `none` for no journal."
    )
    keep_results: int = Field(
        10_000, ge=1, description="Finished results kept in the file (the oldest are pruned first)."
    )
    restore_max_bytes: int = Field(
        1 << 30,
        ge=0,
        description="Bytes of finished results read back into memory at start-up (the newest first); "
        "older ones are answered as evicted (410).",
    )

    def resolve(self, port: int) -> Path | None:
        if self.path is None or self.path.lower() in ("none", "null", ""):
            return None
        if self.path != "auto":
            return Path(self.path).expanduser()
        if port == 0:
            return None
        home = Path(os.environ.get("PRORL_HOME") or Path.home() / ".cache" / "prorl").expanduser()
        return home / "service" / f"journal-{port}.sqlite3"


class Unfinished(NamedTuple):
    """A job the journal holds no result for: it was in flight when its service died."""

    spec: JobSpec
    runs: int  # times it was started, the lost ones included


class JournalError(RuntimeError):
    pass


def job_spec(job: Job) -> JobSpec:
    """The job again as a client would submit it (its budget as it was resolved)."""
    return JobSpec(
        id=job.id,
        task=job.task,
        instance=job.instance,
        sampling_params=job.sampling_params,
        priority=job.priority,
        budget=Budget(active_time_s=job.active_time_s, wall_time_s=job.wall_time_s),
        group_id=job.group_id,
        metadata=job.metadata,
        policy_version=job.policy_version,
    )


Write = (
    tuple[Literal["jobs"], Sequence[Job], int]
    | tuple[Literal["result"], JobResult]
    | tuple[Literal["result"], JobResult, bytes]
    | tuple[Literal["batch"], str, str, dict[str, Any]]
    | tuple[Literal["batch_ended"], str]
    | tuple[Literal["judged"], str, str]
)


class JournalStore:
    """The SQLite file. Not thread-safe: one thread (the journal's writer) uses it."""

    def __init__(self, path: Path, *, keep_results: int = 10_000) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        # One service per journal: two would each run the other's jobs again. The lock goes with
        # its process, so a service killed with -9 never keeps its successor out.
        self._lock = path.with_name(path.name + ".lock").open("a")
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._lock.close()
            raise JournalError(
                f"the journal {path} is in use by another running service; give this one its own "
                "(journal.path=...) or stop the other"
            ) from None
        self.keep_results = keep_results
        # isolation_level=None: transactions are explicit (one per batch of writes).
        self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        # NORMAL in WAL mode: a commit survives the process's death (kill -9); only a power loss
        # can take the last commits back.
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(SCHEMA)

    def close(self) -> None:
        self._db.close()
        self._lock.close()

    # -- writes -----------------------------------------------------------------------------
    def apply(self, writes: Sequence[Write]) -> None:
        """Commit a batch of writes in one transaction."""
        with self._transaction():
            for write in writes:
                self._apply_one(write)
        self._prune()

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def _apply_one(self, write: Write) -> None:
        db = self._db
        match write:
            case ("jobs", jobs, resumed):
                now = time.time()
                if resumed:
                    db.executemany(
                        "UPDATE jobs SET runs = runs + 1 WHERE id = ?", [(job.id,) for job in jobs]
                    )
                else:
                    db.executemany(
                        "INSERT OR IGNORE INTO jobs (id, job, accepted_at) VALUES (?, ?, ?)",
                        [(job.id, job.model_dump_json(), now) for job in jobs],
                    )
            case ("result", result, *as_json):
                self.record_result(result, *as_json)
            case ("batch", batch_id, session_id, request):
                db.execute(
                    "INSERT OR IGNORE INTO batches (id, session_id, request, created_at) VALUES (?, ?, ?, ?)",
                    (batch_id, session_id, json.dumps(request), time.time()),
                )
            case ("batch_ended", batch_id):
                db.execute("UPDATE batches SET ended = 1 WHERE id = ?", (batch_id,))
            case ("judged", group_id, batch_id):
                db.execute(
                    "INSERT OR IGNORE INTO judged (group_id, batch_id) VALUES (?, ?)", (group_id, batch_id)
                )

    def record_result(self, result: JobResult, as_json: bytes | None = None) -> bool:
        """Record a terminal result (`as_json`: its JSON, when the caller has it already); False
        (and nothing written) if one is already recorded."""
        body = zlib.compress(as_json if as_json is not None else result_json(result), 1)
        cursor = self._db.execute(
            "INSERT OR IGNORE INTO results (id, body, finished_at) VALUES (?, ?, ?)",
            (result.id, body, result.finished_at or time.time()),
        )
        return cursor.rowcount == 1

    def _prune(self) -> None:
        """Keep the newest `keep_results` results; older ones go with their jobs. Pruned in steps
        of a tenth, so the delete runs once per thousand results, not once per result."""
        (count,) = self._db.execute("SELECT count(*) FROM results").fetchone()
        if count <= self.keep_results + max(1, self.keep_results // 10):
            return
        with self._transaction():
            (cut,) = self._db.execute(
                "SELECT seq FROM results ORDER BY seq DESC LIMIT 1 OFFSET ?", (self.keep_results,)
            ).fetchone()
            self._db.execute("DELETE FROM jobs WHERE id IN (SELECT id FROM results WHERE seq <= ?)", (cut,))
            self._db.execute("DELETE FROM results WHERE seq <= ?", (cut,))

    def add_owner(self, pid: int) -> list[int]:
        """Record `pid` as the journal's service; returns the pids of the services before it."""
        with self._transaction():
            before = [pid for (pid,) in self._db.execute("SELECT pid FROM owners")]
            self._db.execute("DELETE FROM owners")
            self._db.execute("INSERT INTO owners (pid, started_at) VALUES (?, ?)", (pid, time.time()))
        return before

    # -- reads ------------------------------------------------------------------------------
    def unfinished(self) -> list[Unfinished]:
        """Accepted jobs with no result, in the order they were accepted."""
        rows = self._db.execute(
            "SELECT job, runs FROM jobs WHERE id NOT IN (SELECT id FROM results) ORDER BY seq"
        )
        return [Unfinished(job_spec(Job.model_validate_json(job)), runs) for job, runs in rows]

    def finished(
        self, max_results: int, max_bytes: int, max_memory_bytes: int | None = None
    ) -> tuple[list[JobResult], list[str]]:
        """The newest results, oldest first, up to `max_results`, `max_bytes` (compressed, as
        stored) and `max_memory_bytes` (their JSON, as the result store holds them), and the
        ids of the rest (newest first), which stay in the journal only. SWE results compress
        well: the compressed bound alone would parse gigabytes before the memory budget trimmed
        them; here parsing stops at the first result that does not fit."""
        kept: list[JobResult] = []
        evicted: list[str] = []
        used = used_in_memory = 0
        rows = self._db.execute("SELECT id, body FROM results ORDER BY seq DESC")
        for job_id, body in rows:
            fits = max_memory_bytes is None or used_in_memory < max_memory_bytes
            if fits and len(kept) < max_results and used + len(body) <= max_bytes:
                text = zlib.decompress(body)
                if max_memory_bytes is None or used_in_memory + len(text) <= max_memory_bytes:
                    used += len(body)
                    used_in_memory += len(text)
                    kept.append(JobResult.model_validate_json(text))
                    continue
                used_in_memory = max_memory_bytes  # full: nothing older is parsed
            evicted.append(job_id)
        kept.reverse()
        return kept, evicted

    def result(self, job_id: str) -> JobResult | None:
        row = self._db.execute("SELECT body FROM results WHERE id = ?", (job_id,)).fetchone()
        return JobResult.model_validate_json(zlib.decompress(row[0])) if row else None

    def runs(self, job_id: str) -> int | None:
        row = self._db.execute("SELECT runs FROM jobs WHERE id = ?", (job_id,)).fetchone()
        return row[0] if row else None

    def scheduler_jobs(self, scheduler: str) -> list[Job]:
        """The jobs a DAPO scheduler of this name submitted, in the order they were accepted,
        less those of groups a finished batch already judged."""
        rows = self._db.execute(
            """SELECT job FROM jobs
               WHERE json_extract(job, '$.metadata.dapo.scheduler') = ?
                 AND coalesce(json_extract(job, '$.group_id'), '') NOT IN (
                     SELECT group_id FROM judged WHERE batch_id IN (SELECT id FROM batches WHERE ended = 1))
               ORDER BY seq""",
            (scheduler,),
        )
        return [Job.model_validate_json(job) for (job,) in rows]

    def prompts_started(self, scheduler: str) -> int:
        """How many prompts a DAPO scheduler of this name had started: the highest number among
        its groups (`<scheduler>-<n>`), which outlives the pruning of its older jobs."""
        (count,) = self._db.execute(
            "SELECT max(CAST(substr(json_extract(job, '$.group_id'), ?) AS INTEGER)) FROM jobs "
            "WHERE json_extract(job, '$.metadata.dapo.scheduler') = ?",
            (len(scheduler) + 2, scheduler),
        ).fetchone()
        return int(count or 0)

    def open_batches(self) -> Iterator[tuple[str, str, dict[str, Any]]]:
        """Batches that had not ended: (batch id, session id, request), oldest first."""
        rows = self._db.execute(
            "SELECT id, session_id, request FROM batches WHERE ended = 0 ORDER BY created_at"
        ).fetchall()
        for batch_id, session_id, request in rows:
            yield batch_id, session_id, json.loads(request)


class Journal:
    """The journal as the event loop uses it. `accepted`, `settled` and the batch calls queue a
    write and return at once, in order; one thread commits the queue in batches (a busy service
    commits hundreds of results in one transaction); `flush()` returns when everything queued
    before it is committed, and raises if that commit failed."""

    def __init__(self, store: JournalStore, thread: ThreadPoolExecutor) -> None:
        self.store = store
        self._thread = thread  # the store's one thread: every write and read runs on it
        self._queued: list[Write] = []
        self._queued_done: asyncio.Future[None] | None = None  # the batch being filled
        self._committing: asyncio.Future[None] | None = None  # the batch being committed
        self._writer: asyncio.Task[None] | None = None
        self._failed: list[Write] = []  # a batch whose commit failed: tried again first, next time
        self._closed = False

    @classmethod
    async def open(cls, path: Path, *, keep_results: int = 10_000) -> Journal:
        thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="prorl-journal")
        loop = asyncio.get_running_loop()
        try:
            store = await loop.run_in_executor(thread, lambda: JournalStore(path, keep_results=keep_results))
        except JournalError:
            thread.shutdown(wait=False)
            raise
        except (sqlite3.Error, OSError) as exc:
            thread.shutdown(wait=False)
            raise JournalError(f"cannot open the service journal {path}: {exc}") from exc
        return cls(store, thread)

    async def read[T](self, fn: Callable[..., T], *args: Any) -> T:
        """Run a read of the store on its thread, after every write queued before it."""
        await self.flush()
        return await asyncio.get_running_loop().run_in_executor(self._thread, fn, *args)

    async def result(self, job_id: str) -> JobResult | None:
        """A settled result read back (decompressed and parsed on the store's thread, so a
        megabyte SWE result does not hold the event loop); None when the file does not hold it."""
        return await self.read(self.store.result, job_id)

    # -- what the pipeline and the batches tell it ------------------------------------------
    def accepted(self, jobs: Sequence[Job], *, resumed: int = 0) -> None:
        self._queue(("jobs", list(jobs), resumed))

    def settled(self, result: JobResult, as_json: bytes | None = None) -> None:
        self._queue(("result", result) if as_json is None else ("result", result, as_json))

    def batch_started(self, batch_id: str, session_id: str, request: dict[str, Any]) -> None:
        self._queue(("batch", batch_id, session_id, request))

    def batch_ended(self, batch_id: str) -> None:
        self._queue(("batch_ended", batch_id))

    def judged(self, group_id: str, batch_id: str) -> None:
        self._queue(("judged", group_id, batch_id))

    def _queue(self, write: Write) -> None:
        if self._closed:
            return  # a late result after close: its job was journaled, so it will run again
        loop = asyncio.get_running_loop()
        if self._queued_done is None:
            self._queued_done = loop.create_future()
        if self._failed:
            self._queued[:0], self._failed = self._failed, []
        self._queued.append(write)
        if self._writer is None or self._writer.done():
            self._writer = loop.create_task(self._write(), name="journal-writer")

    async def _write(self) -> None:
        loop = asyncio.get_running_loop()
        while self._queued:
            writes, done = self._queued, self._queued_done
            self._queued, self._queued_done, self._committing = [], None, done
            assert done is not None
            try:
                await loop.run_in_executor(self._thread, self.store.apply, writes)
            except Exception as exc:
                logger.exception("the service journal could not commit %d writes", len(writes))
                self._failed[:0] = writes  # rolled back whole; every write in it is idempotent
                done.set_exception(JournalError(f"the service journal could not commit: {exc}"))
                done.exception()  # retrieved: nobody may be flushing
            else:
                done.set_result(None)
            finally:
                self._committing = None

    async def flush(self) -> None:
        """Wait until every write queued so far is committed (not for writes queued meanwhile:
        under a steady stream of results a flush still returns). Writes whose commit failed are
        tried again first, so a flush after a failure is one that says whether they are on disk."""
        if self._failed and not self._closed:
            self._queue(self._failed.pop())
        for future in [f for f in (self._committing, self._queued_done) if f is not None]:
            await asyncio.shield(future)

    async def close(self) -> None:
        """Commit what is queued, then close the file."""
        try:
            await self.flush()
        finally:
            self._closed = True
            await asyncio.get_running_loop().run_in_executor(self._thread, self.store.close)
            self._thread.shutdown(wait=True)
