# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The contract between the pipeline and a task kind, and the registry that picks one per job.

A handler owns the resources of a rollout between `init` and `release`; the pipeline owns the
schedule (which stage runs when, budgets, cancellation) and guarantees `release` is called
exactly once for every state `init` returned, whatever happens afterwards.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any, Protocol, runtime_checkable

from nemo_gym_prorl.pipeline.job import Evaluation, FailureClass, FailureKind, Job, Trajectory

logger = logging.getLogger(__name__)


@runtime_checkable
class RolloutHandler(Protocol):
    """One task kind (math, code, swe, ...): three async stages plus release.

    - `init(job)`: start the sandbox, set up the workspace and tools; return an opaque state.
      If it raises or is cancelled, it must clean up what it started itself (no state exists
      yet for the pipeline to release).
    - `run(job, state)`: the agent loop; returns the trajectory (a `Trajectory` or a dict).
    - `evaluate(job, state, trajectory)`: score it; returns an `Evaluation` (or a dict). `state`
      is None when `eval_needs_run_state` is False: the RUN sandbox was already released, and
      an evaluator that wants a clean one opens a fresh sandbox itself (closing it in `finally`).
    - `release(state)`: close everything `init` opened. Idempotent; must not raise for
      resources that are already gone.

    Stage calls may be cancelled at any await (job cancelled, budget spent, shutdown).
    """

    eval_needs_run_state: bool

    async def init(self, job: Job) -> Any: ...

    async def run(self, job: Job, state: Any) -> Trajectory | Mapping[str, Any]: ...

    async def evaluate(
        self, job: Job, state: Any | None, trajectory: Trajectory
    ) -> Evaluation | Mapping[str, Any]: ...

    async def release(self, state: Any) -> None: ...


class RolloutFailure(Exception):
    """A stage that cannot produce a result, classified by whose fault it is: `kind`
    (infrastructure: retry elsewhere or later; data: this row can never succeed) and `status`,
    the HTTP status to answer. The pipeline records the class on the job's result, so it reaches
    the caller from whichever process or node ran the stage."""

    def __init__(
        self, kind: FailureKind, message: str, status: int | None = None, code: str | None = None
    ) -> None:
        super().__init__(message)
        self.kind: FailureKind = kind
        self.status = status or (503 if kind == "infrastructure" else 400)
        self.code = code

    def __reduce__(self) -> tuple[Any, ...]:
        # Crosses process boundaries (a Ray node's stage raises it): rebuilt with every field.
        return (type(self), (self.kind, str(self), self.status, self.code))

    def classification(self) -> FailureClass:
        return FailureClass(kind=self.kind, status=self.status, message=str(self), code=self.code)


INVALID_INSTANCE = "invalid_instance"  # the API error code of an instance refused at submit


class InvalidInstanceError(ValueError):
    """An instance the task cannot run (a missing prompt, a field of the wrong type, a tool the
    task does not offer): refused at submit (HTTP 400) with the offending field named."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"instance.{field}: {reason}" if field else reason)
        self.field = field
        self.reason = reason


@runtime_checkable
class ValidatingHandler(Protocol):
    """A handler that can tell, before any work, whether it can run an instance."""

    def validate(self, instance: Mapping[str, Any]) -> None:
        """Raise `InvalidInstanceError` naming the field when the instance cannot be run."""
        ...


class UnknownTaskError(LookupError):
    def __init__(self, task: str | None, known: Iterable[str]) -> None:
        self.task = task
        self.known = sorted(known)
        if task is None:
            reason = "job names no task: set `task` or `instance.data_source`"
        else:
            reason = f"unknown task {task!r}"
        super().__init__(f"{reason}; known tasks: {', '.join(self.known) or '(none configured)'}")


class HandlerRegistry:
    """Handlers by task name, plus aliases (e.g. several `data_source` values of one domain)."""

    def __init__(self, default: str | None = None) -> None:
        self._handlers: dict[str, RolloutHandler] = {}
        self._aliases: dict[str, str] = {}
        self.default = default  # the task of a job that names none (one resources server: its own)

    def register(self, name: str, handler: RolloutHandler, aliases: Iterable[str] = ()) -> None:
        if not isinstance(handler, RolloutHandler):
            raise TypeError(f"handler for {name!r} does not implement RolloutHandler: {handler!r}")
        for key in (name, *aliases):
            if key in self._handlers or key in self._aliases:
                raise ValueError(f"task name {key!r} is registered twice")
        self._handlers[name] = handler
        for alias in aliases:
            self._aliases[alias] = name

    def names(self) -> list[str]:
        return sorted([*self._handlers, *self._aliases])

    def canonical(self, task: str | None) -> str:
        """The registered name for a task or alias; raises UnknownTaskError."""
        if task is not None:
            if task in self._handlers:
                return task
            if task in self._aliases:
                return self._aliases[task]
        raise UnknownTaskError(task, self.names())

    def resolve(self, task: str | None, instance: Mapping[str, Any]) -> str:
        """The one rule naming a job's task: its `task`, else the instance's `data_source`, else
        the registry's default; returns the registered name, or raises UnknownTaskError."""
        named = task or instance.get("data_source") or self.default
        return self.canonical(str(named) if named is not None else None)

    def validate(self, task: str, instance: Mapping[str, Any]) -> None:
        """Raise `InvalidInstanceError` if `task`'s handler cannot run `instance`."""
        if not isinstance(instance, Mapping):
            raise InvalidInstanceError("", "the instance must be a JSON object")
        handler = self.get(task)
        if isinstance(handler, ValidatingHandler):
            handler.validate(instance)

    def get(self, task: str) -> RolloutHandler:
        return self._handlers[self.canonical(task)]

    def handlers(self) -> dict[str, RolloutHandler]:
        return dict(self._handlers)

    async def aclose(self) -> None:
        """Release what handlers hold beyond single rollouts (a task's grader processes, warm test
        runners): each handler's `aclose()`, where it has one. Never raises."""
        for name, handler in self._handlers.items():
            close = getattr(handler, "aclose", None)
            if close is None:
                continue
            try:
                await close()
            except Exception:
                logger.warning("closing the %r handler failed", name, exc_info=True)
