# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""DAPO batches as service objects: sessions (a scheduler over one prompt source, whose carried
work survives from batch to batch), batch runs (a background task whose events are kept for
polling and replayed to any number of NDJSON streams), and the server-side dataset catalog.

Bounded: at most `max_sessions` sessions and `max_batches` (`service.max_batches`) retained batch records (the oldest
finished ones are forgotten first), and at most `max_batch_bytes` (`service.max_batch_bytes`) of
those records' groups' samples: beyond it, the samples of the oldest ended batches are dropped,
delivered ones (streamed to their end, or read with their groups) first. Such a batch still
answers with its stats; asked for its groups it answers 410, naming the budget. Shutdown cancels
every running batch and closes every session before the pipeline stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from nemo_gym_prorl.pipeline.dapo import BatchEvent, BatchStats, DapoConfig, DapoScheduler
from nemo_gym_prorl.pipeline.groups import GroupResult
from nemo_gym_prorl.pipeline.prompt_source import CyclingSource, PromptSource, iter_jsonl
from nemo_gym_prorl.pipeline.store import memory_size
from nemo_gym_prorl.service.batch_resume import prompts_in_flight, skip_prompts
from nemo_gym_prorl.service.core import RolloutService
from nemo_gym_prorl.service.errors import ApiError, as_api_error
from nemo_gym_prorl.service.journal import Journal

log = logging.getLogger(__name__)

ID_PATTERN = r"^[A-Za-z0-9_.:\-]+$"
MAX_INLINE_ROWS = 100_000


class DatasetCatalog:
    """Server-side JSONL datasets by name. A request names one; it never sends a path (a client
    must not make the server read arbitrary files)."""

    def __init__(self, datasets: Mapping[str, str | Path] | None = None) -> None:
        self._paths = {name: Path(path) for name, path in (datasets or {}).items()}

    @classmethod
    def from_env(cls) -> DatasetCatalog:
        """`PRORL_DATASETS_DIR` (every `*.jsonl` in it, by file stem) and `PRORL_DATASETS`
        (`name=path,name2=path2`), the latter winning."""
        found: dict[str, str | Path] = {}
        directory = os.environ.get("PRORL_DATASETS_DIR")
        if directory and Path(directory).is_dir():
            found.update({p.stem: p for p in sorted(Path(directory).glob("*.jsonl"))})
        for item in filter(None, (os.environ.get("PRORL_DATASETS") or "").split(",")):
            name, _, path = item.partition("=")
            if name.strip() and path.strip():
                found[name.strip()] = path.strip()
        return cls(found)

    def names(self) -> list[str]:
        return sorted(self._paths)

    def paths(self) -> dict[str, Path]:
        return dict(self._paths)

    def path(self, name: str) -> Path:
        path = self._paths.get(name)
        if path is None:
            known = ", ".join(self.names()) or "(none configured: set PRORL_DATASETS_DIR or PRORL_DATASETS)"
            raise ApiError(404, "unknown_dataset", f"no dataset {name!r}; known: {known}")
        if not path.is_file():
            # The client knows the dataset by its name; where the server keeps it is the log's.
            log.warning("dataset %r: %s is not readable", name, path)
            raise ApiError(503, "dataset_unavailable", f"dataset {name!r}: its file is not readable")
        return path


class SourceSpec(BaseModel):
    """Prompts given inline (`rows`) or by server-side `dataset` name; cycled `epochs` times
    (None: forever), optionally shuffled per epoch."""

    model_config = ConfigDict(extra="forbid")

    rows: list[dict[str, Any]] | None = Field(None, min_length=1, max_length=MAX_INLINE_ROWS)
    dataset: str | None = Field(None, min_length=1, max_length=256)
    epochs: int | None = Field(1, ge=1)
    shuffle_seed: int | None = None
    key_field: str | None = "task_id"

    @model_validator(mode="after")
    def _one_of(self) -> SourceSpec:
        if (self.rows is None) == (self.dataset is None):
            raise ValueError("give exactly one of `rows` (inline) or `dataset` (server-side name)")
        return self

    def label(self) -> str:
        """How a refusal names this source: `source.rows` or `source.dataset 'name'`."""
        return "source.rows" if self.rows is not None else f"source.dataset {self.dataset!r}"

    def rows_once(self, catalog: DatasetCatalog) -> Iterable[Mapping[str, Any]]:
        """Every row of one epoch, in the source's own order (a dataset read lazily; a line that
        is not a JSON object is refused, naming the file and line)."""
        if self.rows is not None:
            return self.rows
        return _dataset_rows(catalog.path(str(self.dataset)), self.label())

    def build(self, catalog: DatasetCatalog) -> PromptSource:
        data: list[dict[str, Any]] | Path = (
            self.rows if self.rows is not None else catalog.path(str(self.dataset))
        )
        return CyclingSource(
            data, epochs=self.epochs, shuffle_seed=self.shuffle_seed, key_field=self.key_field
        )


def _dataset_rows(path: Path, label: str) -> Iterator[dict[str, Any]]:
    try:
        yield from iter_jsonl(path)
    except ValueError as exc:  # the file's own fault, named by line: the request cannot run
        # Named by its file's name and line, not by the directory the server keeps it in.
        reason = str(exc).replace(str(path), path.name)
        raise ApiError(400, "invalid_dataset", f"{label}: {reason}") from None


class BatchRequest(BaseModel):
    """Start a batch. A new session needs `source` (and takes `config`); naming an existing
    `session_id` continues it, with its carried-over work and its source position."""

    model_config = ConfigDict(extra="forbid")

    groups: int | None = Field(None, ge=1, le=100_000, description="B; default: config.batch_groups.")
    session_id: str | None = Field(None, min_length=1, max_length=64, pattern=ID_PATTERN)
    source: SourceSpec | None = None
    config: DapoConfig | None = None
    policy_version: int | None = Field(
        None,
        ge=0,
        description="The trainer's step, stamped on the batch's jobs (staleness on NeMo RL's path).",
    )


class BatchInfo(BaseModel):
    batch_id: str
    session_id: str
    status: str
    created_at: float
    stats: BatchStats
    resumed: bool = Field(
        False,
        description="Taken back from the journal after the service died: its groups are delivered "
        "again from the first (each once in this run), its jobs keep their ids.",
    )
    samples_dropped: str | None = Field(
        None,
        description="Why this ended batch's groups can no longer be read (their samples were "
        "dropped to keep batch records within service.max_batch_bytes); None while they can.",
    )
    groups: list[GroupResult] | None = Field(None, description="Delivered informative groups (on request).")
    dropped: list[GroupResult] | None = Field(None, description="Summaries of dropped groups (on request).")


class SessionInfo(BaseModel):
    session_id: str
    config: DapoConfig
    prompts_in_flight: int
    ready_groups: int
    running_batch: str | None
    batches: list[str]
    source: dict[str, Any]
    totals: dict[str, Any]


class BatchList(BaseModel):
    batches: list[BatchInfo]


class SessionList(BaseModel):
    sessions: list[SessionInfo]


class BatchRun:
    """One batch: its background task and every event it produced, for polling and replay."""

    def __init__(
        self,
        batch_id: str,
        session: Session,
        groups: int | None,
        policy_version: int | None = None,
        *,
        journal: Journal | None = None,
        resumed: bool = False,
    ) -> None:
        self.id = batch_id
        self.session = session
        self.groups = groups
        self.policy_version = policy_version
        self.journal = journal  # told which groups this batch judged, and when it ended
        self.resumed = resumed
        self.created_at = time.time()
        self.events: list[BatchEvent] = []
        self.stats: BatchStats | None = None
        self.done = asyncio.Event()
        self._changed = asyncio.Condition()
        self.task: asyncio.Task[None] | None = None
        self.bytes = 0  # its groups' samples and rows (memory, estimated as each arrives)
        self.delivered = False  # read whole once it ended: its samples are the first to go
        self.followers = 0  # streams replaying it now: its samples are kept while they read
        self.samples_dropped: str | None = None
        self.grown: Callable[[], None] = lambda: None  # told when its bytes grow or it ends

    async def run(self) -> None:
        try:
            async for event in self.session.scheduler.stream_batch(self.groups, self.policy_version):
                if self.stats is None:
                    self.stats = self.session.scheduler.current
                await self._append(event)
                if event.type == "end":
                    self.stats = event.stats
        finally:
            if self.stats is None:
                self.stats = self.session.scheduler.current
            if self.journal is not None:
                self.journal.batch_ended(self.id)
            self.session.running = None
            self.done.set()
            async with self._changed:
                self._changed.notify_all()
            self.grown()  # ended: its samples may now be dropped to make room

    async def _append(self, event: BatchEvent) -> None:
        if self.journal is not None and event.group is not None:
            self.journal.judged(event.group.group_id, self.id)  # not resumed again after a crash
        async with self._changed:
            self.events.append(event)
            self._changed.notify_all()
        if event.group is not None and (event.group.samples or event.group.row):
            self.bytes += memory_size(event.group.samples) + memory_size(event.group.row)
            self.grown()

    def follow(self) -> AsyncIterator[BatchEvent]:
        """Every event from the first, then live ones, until the batch ends. Raises at once (not
        on the first read) when its samples were dropped, so a stream can answer 410."""
        self.check_samples()
        return self._follow()

    async def _follow(self) -> AsyncIterator[BatchEvent]:
        seen = 0
        self.followers += 1
        try:
            while True:
                async with self._changed:
                    while seen >= len(self.events) and not self.done.is_set():
                        await self._changed.wait()
                    fresh = self.events[seen:]
                seen += len(fresh)
                for event in fresh:
                    yield event
                if self.done.is_set() and seen >= len(self.events):
                    self.delivered = True
                    return
        finally:
            self.followers -= 1

    def check_samples(self) -> None:
        if self.samples_dropped is not None:
            raise ApiError(410, "samples_dropped", self.samples_dropped)

    def drop_samples(self, budget: int) -> None:
        """Forget its groups' samples and rows (summaries stay) to keep records within `budget`."""
        when = "after they were delivered" if self.delivered else "before they were read"
        self.samples_dropped = (
            f"batch {self.id} ended and its groups' samples were dropped {when}, to keep DAPO batch "
            f"records within service.max_batch_bytes ({budget} bytes); read a batch's groups (stream "
            "it, or GET it with include_groups=true) soon after it ends, or raise service.max_batch_bytes"
        )
        self.events = [
            e.model_copy(update={"group": e.group.summary()}) if e.group is not None else e
            for e in self.events
        ]
        self.bytes = 0

    def info(self, *, include: bool = False) -> BatchInfo:
        if include:
            self.check_samples()
            self.delivered = self.delivered or self.done.is_set()
        stats = self.stats or BatchStats(batch_index=0, requested_groups=self.groups or 0)
        groups = [e.group for e in self.events if e.type == "group" and e.group is not None]
        dropped = [e.group for e in self.events if e.type == "dropped" and e.group is not None]
        return BatchInfo(
            batch_id=self.id,
            session_id=self.session.id,
            status=stats.status,
            created_at=self.created_at,
            stats=stats,
            resumed=self.resumed,
            samples_dropped=self.samples_dropped,
            groups=groups if include else None,
            dropped=dropped if include else None,
        )


class Session:
    def __init__(self, session_id: str, scheduler: DapoScheduler, source: SourceSpec) -> None:
        self.id = session_id
        self.scheduler = scheduler
        self.source = source  # as asked: a service restarted after a crash builds it again
        self.running: BatchRun | None = None
        self.batch_ids: list[str] = []
        self.last_used = time.monotonic()

    def info(self) -> SessionInfo:
        s = self.scheduler
        return SessionInfo(
            session_id=self.id,
            config=s.config,
            prompts_in_flight=s.prompts_in_flight,
            ready_groups=s.ready_groups,
            running_batch=self.running.id if self.running else None,
            batches=list(self.batch_ids),
            source=s.source.position(),
            totals=s.totals(),
        )


class BatchManager:
    def __init__(
        self,
        service: RolloutService,
        datasets: DatasetCatalog | None = None,
        *,
        max_sessions: int = 64,
        max_batches: int | None = None,
        max_batch_bytes: int | None = None,
    ) -> None:
        self.service = service
        self.datasets = datasets or DatasetCatalog.from_env()
        self.max_sessions = max_sessions
        self.max_batches = max_batches or service.options.max_batches
        self.max_batch_bytes = max_batch_bytes or service.options.max_batch_bytes
        self.sessions: dict[str, Session] = {}
        self.batches: OrderedDict[str, BatchRun] = OrderedDict()
        self._lock = asyncio.Lock()

    async def start(self, request: BatchRequest) -> BatchRun:
        await self._check_rows(request)  # 400 before 503: bad input is bad whatever the state
        await self.service.check_admission()
        async with self._lock:  # session creation and the busy check are one step
            session = self.sessions.get(request.session_id) if request.session_id else None
            if session is None:
                session = self._new_session(request)
            elif request.source is not None or request.config is not None:
                raise ApiError(
                    409,
                    "session_exists",
                    f"session {session.id!r} exists: its source and config are fixed; "
                    "omit them to continue it, or close it first",
                )
            if session.running is not None:
                raise ApiError(
                    409, "batch_running", f"session {session.id!r} is running batch {session.running.id}"
                )
            journal = self.service.journal
            batch_id = f"batch-{uuid.uuid4().hex[:12]}"
            run = BatchRun(batch_id, session, request.groups, request.policy_version, journal=journal)
            if journal is not None:  # before its first job: a restart resumes the batch, not only its jobs
                journal.batch_started(run.id, session.id, self._resumable(session, request))
            self._launch(session, run)
        await self.service.flushed()  # the batch is on disk before its 202
        # Let the batch take its first step, so an immediate GET sees it running.
        await asyncio.sleep(0)
        return run

    def _launch(self, session: Session, run: BatchRun) -> None:
        session.running = run
        session.batch_ids.append(run.id)
        session.last_used = time.monotonic()
        run.grown = self._bound_bytes
        self._retain(run)
        run.task = asyncio.create_task(run.run(), name=f"dapo-{run.id}")

    @staticmethod
    def _resumable(session: Session, request: BatchRequest) -> dict[str, Any]:
        """The batch as a restarted service needs it: its session whole (source and config, which
        a continuing batch's request leaves out) and its place among the session's batches."""
        return {
            "request": BatchRequest(
                groups=request.groups,
                session_id=session.id,
                source=session.source,
                config=session.scheduler.config,
                policy_version=request.policy_version,
            ).model_dump(mode="json"),
            "batch_index": session.scheduler.batches_started + 1,
        }

    async def resume(self) -> int:
        """Start again the batches a dead service was running (from its journal), each under its
        id, in its session, with the jobs it had started; returns how many."""
        journal = self.service.journal
        if journal is None:
            return 0
        resumed = 0
        for batch_id, session_id, saved in await journal.read(lambda: list(journal.store.open_batches())):
            request = BatchRequest.model_validate(saved["request"])
            try:
                session = self._new_session(request)
            except ApiError as exc:  # a dataset gone, too many sessions: said, and left in the journal
                log.warning("DAPO batch %s (session %s) cannot resume: %s", batch_id, session_id, exc.reason)
                continue
            scheduler = session.scheduler
            jobs = await journal.read(journal.store.scheduler_jobs, scheduler.id)
            started = await journal.read(journal.store.prompts_started, scheduler.id)
            prompts = prompts_in_flight(jobs, scheduler.config.group_size)
            index = int(saved.get("batch_index", 1))
            await asyncio.to_thread(skip_prompts, scheduler.source, started)  # reads a file
            scheduler.resume(prompts, batches_before=index - 1, prompts_started=started)
            run = BatchRun(
                batch_id, session, request.groups, request.policy_version, journal=journal, resumed=True
            )
            self._launch(session, run)
            resumed += 1
            log.info("DAPO batch %s resumed with %d prompts in flight", batch_id, len(prompts))
        return resumed

    async def _check_rows(self, request: BatchRequest) -> None:
        """A new session's rows, inline or a dataset's, are checked at the door like any
        submitted instance before anything starts: the first bad one is named by its index in
        the source (a dataset is read once for this, a chunk at a time)."""
        if request.session_id in self.sessions or request.source is None:
            return  # a running session's source is fixed (giving one again is refused: 409)
        source = request.source
        task = request.config.task if request.config is not None else DapoConfig().task
        refusal = await self.service.first_refusal(source.rows_once(self.datasets), task)
        if refusal is None:
            return
        answer = as_api_error(refusal.error)  # the code every door answers it with, the row named
        assert answer is not None  # the table knows every refusal
        raise ApiError(answer.status, answer.code, f"{source.label()}[{refusal.index}]: {answer.reason}")

    def _new_session(self, request: BatchRequest) -> Session:
        if request.source is None:
            what = f"no session {request.session_id!r}" if request.session_id else "a new session"
            raise ApiError(422, "source_required", f"{what}: give `source` (inline rows or a dataset name)")
        if len(self.sessions) >= self.max_sessions:
            idle = [s for s in self.sessions.values() if s.running is None]
            raise ApiError(
                429,
                "too_many_sessions",
                f"{len(self.sessions)} sessions open (max {self.max_sessions}); close one with "
                f"DELETE /v1/batch_sessions/{{id}} ({len(idle)} are idle)",
            )
        config = request.config or DapoConfig()
        source = request.source.build(self.datasets)
        session_id = request.session_id or f"dapo-{uuid.uuid4().hex[:10]}"
        scheduler = DapoScheduler(self.service.pipeline, source, config, name=session_id)
        session = Session(session_id, scheduler, request.source)
        self.sessions[session_id] = session
        return session

    def _retain(self, run: BatchRun) -> None:
        self.batches[run.id] = run
        while len(self.batches) > self.max_batches:
            oldest = next((b for b in self.batches.values() if b.done.is_set()), None)
            if oldest is None:
                break
            del self.batches[oldest.id]

    def _bound_bytes(self) -> None:
        """Drop the samples of ended batches, delivered ones first, then the oldest, until the
        records fit `max_batch_bytes`. A running batch or one being streamed keeps them: its
        reader needs them now (so a single batch bigger than the budget is still delivered)."""
        total = sum(run.bytes for run in self.batches.values())
        if total <= self.max_batch_bytes:
            return
        ended = [r for r in self.batches.values() if r.done.is_set() and r.bytes and not r.followers]
        ended.sort(key=lambda r: not r.delivered)  # stable: the oldest first within each kind
        for run in ended:
            if total <= self.max_batch_bytes:
                return
            total -= run.bytes
            run.drop_samples(self.max_batch_bytes)

    def get(self, batch_id: str) -> BatchRun:
        run = self.batches.get(batch_id)
        if run is None:
            raise ApiError(404, "unknown_batch", f"no batch {batch_id!r} (never started, or forgotten)")
        return run

    def session(self, session_id: str) -> Session:
        session = self.sessions.get(session_id)
        if session is None:
            raise ApiError(404, "unknown_session", f"no batch session {session_id!r}")
        return session

    async def cancel(self, batch_id: str, inflight: Literal["carry_over", "cancel"] | None) -> BatchRun:
        """End a running batch now; in-flight jobs follow `inflight` (default: the session's
        `on_ready`). Returns once the batch has ended."""
        run = self.get(batch_id)
        if run.task is not None and not run.done.is_set():
            run.session.scheduler.set_inflight_policy(inflight)
            run.task.cancel()
            await asyncio.wait({run.task})
        return run

    async def close_session(self, session_id: str) -> int:
        """Cancel its batch and every job it has in flight; returns finished rollouts lost."""
        session = self.session(session_id)
        if session.running is not None:
            await self.cancel(session.running.id, "cancel")
        self.sessions.pop(session_id, None)
        return await session.scheduler.close(f"batch session {session_id} closed")

    async def aclose(self) -> None:
        for session_id in list(self.sessions):
            with contextlib.suppress(Exception):
                await self.close_session(session_id)
