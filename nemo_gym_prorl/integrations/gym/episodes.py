# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Gym 0.7 episodes over the ProRL pipeline: how a finished (or refused) rollout becomes Gym's
result or typed `EpisodeFailure`, and the ledger that keeps an attempt retried by rollout
collection from running a rollout twice.

The one table of failures (`failure_for_error`, `failure_for_result`; `docs/environment_server.md`
prints it):

| what happened                                   | failure_kind              | terminal | stage        |
|-------------------------------------------------|---------------------------|----------|--------------|
| row refused at submit (`invalid_instance`)      | prorl:invalid_instance    | yes      | seed         |
| row names no task (`unknown_task`), bad request | prorl:invalid_request     | yes      | seed         |
| queue full, service paused                      | prorl:queue_full          | no       | admission    |
| no LLM backend can take work                    | provider_unavailable      | no       | admission    |
| shutting down                                   | shutdown                  | no       | admission    |
| resources server unreachable at submit's check  | transport_unreachable     | no       | admission    |
| resources server unreachable / 5xx at seed      | transport_unreachable     | no       | seed         |
| row refused by the resources server at seed     | prorl:invalid_instance    | yes      | seed         |
| uncaught error in INIT / RUN / EVAL             | prorl:stage_error         | yes      | seed/agent/verification |
| inference died mid-trajectory                   | transport_peer_drop       | no       | agent        |
| no model turn (first prompt over the context)   | prorl:no_generation       | yes      | agent        |
| no model turn (time ran out first)              | prorl:no_generation       | no       | agent        |
| time budget spent (active or wall)              | agent_timeout             | no       | where it ran |
| grader unreachable or unusable (masked verify)  | verifier_error            | no       | verification |
| cancelled                                       | cancelled                 | no       | (unknown)    |

A rollout that ran and was graded is a result whatever the policy did (wrong answer, malformed
reply, turn or token limit): those earn their reward; only what leaves no usable sample is a
failure. "Terminal" says whether another attempt could go differently: a row the task cannot
run never will; an outage, a timeout or a grader fault may.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from collections import Counter, OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from nemo_gym.episode_types import EpisodeFailure, EpisodeId
from nemo_gym.global_config import ATTEMPT_INDEX_KEY_NAME, ROLLOUT_ID_KEY_NAME
from nemo_gym.rollout_correlation import ROLLOUT_ID_PATTERN
from pydantic import BaseModel, ConfigDict, Field, model_validator

from nemo_gym_prorl.integrations.gym.collection_keys import is_collector_key
from nemo_gym_prorl.integrations.nemo_rl.result import NO_GENERATION
from nemo_gym_prorl.pipeline import JobResult, JobState

# The plugin's own kinds, namespaced as Gym asks (`<server>:<kind>`) for what its vocabulary lacks.
INVALID_INSTANCE = "prorl:invalid_instance"
INVALID_REQUEST = "prorl:invalid_request"
QUEUE_FULL = "prorl:queue_full"
STAGE_ERROR = "prorl:stage_error"

# (failure_kind, terminal, stage) of a request refused before any stage ran, by the stack's API
# error code (`service.errors`); an unknown code is the stack's own fault, not the row's.
_REFUSALS: dict[str, tuple[str, bool, str]] = {
    "invalid_instance": (INVALID_INSTANCE, True, "seed"),
    "unknown_task": (INVALID_REQUEST, True, "seed"),
    "bad_row": (INVALID_REQUEST, True, "seed"),
    "invalid_request": (INVALID_REQUEST, True, "seed"),
    "duplicate_id": (INVALID_REQUEST, True, "admission"),
    "queue_full": (QUEUE_FULL, False, "admission"),
    "not_running": (QUEUE_FULL, False, "admission"),
    "no_backend": ("provider_unavailable", False, "admission"),
    "infrastructure_failure": ("transport_unreachable", False, "admission"),
    "shutting_down": ("shutdown", False, "admission"),
}
_STAGE_OF_CRITICAL = {"init": "seed", "run": "agent", "eval": "verification"}
_TIMED_OUT_IN = re.compile(r"during (?:Stage\.)?(INIT|RUN|EVAL|init|run|eval)\b")


def _failure(reason: str, kind: str, terminal: bool, stage: str | None) -> EpisodeFailure:
    return EpisodeFailure.model_validate(
        {"failure_reason": reason[:2000] or kind, "terminal": terminal, "failure_kind": kind, "stage": stage}
    )


def failure_for_error(status: int, code: str, reason: str) -> EpisodeFailure:
    """The failure of a request the stack refused (an API error: status, code, reason)."""
    kind, terminal, stage = _REFUSALS.get(code, (STAGE_ERROR, status < 500, "admission"))
    return _failure(f"{code}: {reason}", kind, terminal, stage)


def failure_for_result(result: JobResult, body: dict[str, Any] | None) -> EpisodeFailure | None:
    """The failure of a finished job, or None when it is a result Gym should score.

    `body` is the Gym verify response built from a done job (`result.run_result`), None otherwise."""
    if result.state is JobState.CANCELLED:
        return _failure(result.cancel_reason or "cancelled", "cancelled", False, None)
    if result.state is not JobState.DONE:
        return _failure_of_failed_job(result)
    trajectory = result.trajectory
    assert trajectory is not None and body is not None  # a done job has both
    if trajectory.infrastructure_failed:
        failure = trajectory.failure or {}
        reason = f"inference failed mid-trajectory: {failure.get('kind')}: {failure.get('message')}"
        return _failure(reason, "transport_peer_drop", False, "agent")
    if trajectory.num_turns == 0 or trajectory.generated_tokens == 0:
        stop = str(trajectory.stop_reason)
        # The first prompt over the context never fits; time running out first may not recur.
        terminal = stop == "context_length"
        return _failure(f"no model turn was generated ({stop})", NO_GENERATION, terminal, "agent")
    verify = result.report.get("verify")
    if result.report.get("mask_sample") or (isinstance(verify, dict) and verify.get("mask_sample")):
        kind = str(result.report.get("failure_kind") or "verifier_error")
        reason = str(result.report.get("failure_reason") or (verify or {}).get("failure_reason") or kind)
        return _failure(reason, kind, False, "verification")
    return None


def _failure_of_failed_job(result: JobResult) -> EpisodeFailure:
    reason = result.error or result.critical_error or "rollout failed"
    if result.critical_error == "timeout":
        match = _TIMED_OUT_IN.search(reason)
        stage = _STAGE_OF_CRITICAL[match.group(1).lower()] if match else None
        return _failure(reason, "agent_timeout", False, stage)
    stage = _STAGE_OF_CRITICAL.get(str(result.critical_error))
    classified = result.failure
    if classified is not None:
        if classified.kind == "data":  # the resources server refused the row at seed
            reason = f"{classified.code or 'invalid_instance'}: {classified.message}"
            return _failure(reason, INVALID_INSTANCE, True, stage)
        return _failure(classified.message, "transport_unreachable", False, stage)
    if result.mask_sample:  # a node or backend lost while the stage ran: the infrastructure's
        return _failure(reason, "transport_peer_drop", False, stage)
    return _failure(reason, STAGE_ERROR, True, stage)


def episode_result(body: dict[str, Any], result: JobResult) -> dict[str, Any]:
    """The `/run` body of a scored rollout as an episode's result: without the row's routing keys
    and the records collection builds itself from the agent's observation bundle."""
    out = {k: v for k, v in body.items() if not is_collector_key(k)}
    observed = result.trajectory.observations if result.trajectory is not None else None
    if isinstance(observed, dict) and observed.get("bundle") is not None:
        out["ng_agent_observations"] = observed["bundle"]
    return out


class EpisodeOutcome(BaseModel):
    """What one episode produced: exactly one of the Gym verify response or a typed failure."""

    model_config = ConfigDict(extra="forbid")

    result: dict[str, Any] | None = None
    failure: EpisodeFailure | None = None
    job_id: str | None = Field(None, description="The pipeline job that ran it (None: refused before).")
    attempt: int = Field(0, ge=0, description="The attempt whose run produced this outcome.")

    @model_validator(mode="after")
    def _exactly_one(self) -> EpisodeOutcome:
        if (self.result is None) == (self.failure is None):
            raise ValueError("an episode outcome has exactly one of result or failure")
        return self

    @property
    def settled(self) -> bool:
        """Another attempt would only repeat it: a result, or a failure no retry can change."""
        return self.result is not None or bool(self.failure and self.failure.terminal)


EpisodeRun = Callable[[], Awaitable[EpisodeOutcome]]


def task_digest(row: Mapping[str, Any], collection_run: str | None = None) -> str:
    """What makes two rows the same rollout's task: everything but the attempt's own keys, and
    the collection run they were dispatched in when it is named (two runs' episodes `0-0` of one
    task are two rollouts)."""
    stable: Any = {k: v for k, v in row.items() if k not in (ATTEMPT_INDEX_KEY_NAME, ROLLOUT_ID_KEY_NAME)}
    if collection_run is not None:
        stable = {"collection_run": collection_run, "row": stable}
    return hashlib.sha256(json.dumps(stable, sort_keys=True, default=str).encode()).hexdigest()[:32]


COLLECTION_RUN_PATTERN = ROLLOUT_ID_PATTERN.pattern
"""A collection run's name: the characters of Gym's rollout ids."""


class EpisodeLedger:
    """One rollout per episode, whatever its attempts. Rollout collection retries an episode
    whose reply it lost or whose failure was not terminal under the same `rollout_id` with a
    higher `attempt`; a resumed collection re-dispatches what was in flight as attempt 0 again.
    Gym's rollout ids (`<task index>-<rollout index>`) repeat across collection runs, and Gym
    0.7 names no collection run, so an episode is its `rollout_id` and its task's digest (with
    the collection run's name when the environment server is given one, `collection_run`):

    - any attempt that arrives while the same episode still runs joins it (no second rollout);
    - a retry of a settled episode (a result, or a terminal failure) is answered again, not
      re-run: a lost reply never costs a second rollout, its model calls or its recorded tokens;
    - attempt 0 of a settled episode in a named collection run is that run's resume
      re-dispatching what was in flight at a kill: it is answered again too, not re-run;
    - attempt 0 of a settled episode with no run named may be a new collection's rollout (its
      id repeats): it runs anew;
    - an unsettled failure (an outage, a timeout, a cancel) lets the next attempt run anew.

    So an attempt's cancel may stop the rollout only while no other attempt waits on it
    (`shared_with_another_attempt`), and an episode's identity everywhere (the rollout it runs,
    the cancel that stops it) is its `rollout_id` and its task's digest: two episodes `0-0` of
    different tasks are two rollouts, and one's cancel never reaches the other.

    Settled outcomes are kept for the last `capacity` episodes (an in-memory bound: a retry
    comes within one collection run, long before that many later rollouts)."""

    def __init__(self, capacity: int = 20_000) -> None:
        self.capacity = capacity
        self._running: dict[tuple[str, str], asyncio.Task[EpisodeOutcome]] = {}
        self._settled: OrderedDict[tuple[str, str], EpisodeOutcome] = OrderedDict()
        self._waiting: dict[tuple[str, str], Counter[int]] = {}  # attempts awaiting a running rollout

    async def run(
        self, episode: EpisodeId, digest: str, start: EpisodeRun, *, named_run: bool = False
    ) -> EpisodeOutcome:
        """The episode's outcome: settled, joined, or run by `start`. `named_run`: the episode
        belongs to a named collection run (`digest` includes the name), where any dispatch of a
        settled episode is a re-dispatch."""
        key = (episode.rollout_id, digest)
        settled = self._settled.get(key)
        if settled is not None and (episode.attempt > 0 or named_run):
            return settled
        task = self._running.get(key)
        if task is None:
            task = asyncio.create_task(start(), name=f"episode-{episode.capture_key}")
            self._running[key] = task
            task.add_done_callback(lambda done: self._record(key, done))
        waiting = self._waiting.setdefault(key, Counter())
        waiting[episode.attempt] += 1
        try:
            # A caller that goes away leaves the rollout running for the attempt that follows it;
            # `cancel` is how an episode's owner stops it.
            return await asyncio.shield(task)
        finally:
            waiting[episode.attempt] -= 1
            if waiting.total() <= 0 and self._waiting.get(key) is waiting:
                del self._waiting[key]

    def shared_with_another_attempt(self, episode: EpisodeId, digest: str) -> bool:
        """Whether another attempt of the episode awaits its running rollout (so this attempt's
        cancel must leave it running)."""
        waiting = self._waiting.get((episode.rollout_id, digest), Counter())
        return any(count > 0 for attempt, count in waiting.items() if attempt != episode.attempt)

    def _record(self, key: tuple[str, str], task: asyncio.Task[EpisodeOutcome]) -> None:
        if self._running.get(key) is task:
            del self._running[key]
        self._settled.pop(key, None)
        if task.cancelled() or task.exception() is not None:
            return
        outcome = task.result()
        if outcome.settled:
            self._settled[key] = outcome
            while len(self._settled) > self.capacity:
                self._settled.popitem(last=False)

    def outcome(self, rollout_id: str, digest: str) -> EpisodeOutcome | None:
        return self._settled.get((rollout_id, digest))


# -- the agent's episode routes, as the environment server calls them -------------------------------
EPISODE_PATH = "/v1/episodes/run"
EPISODE_CANCEL_PATH = "/v1/episodes/cancel"


class EpisodeRunRequest(BaseModel):
    """`POST /v1/episodes/run` on the agent: one episode of the row's rollout."""

    model_config = ConfigDict(extra="forbid")

    episode_id: EpisodeId
    row: dict[str, Any] = Field(description="The task as a dataset row (a materialized task's input).")
    wall_time_s: float | None = Field(
        None, gt=0, description="The rollout's wall deadline: the pipeline ends it (agent_timeout) by then."
    )
    materialized: bool = Field(
        True,
        description="An episode request's task (its result leaves out what collection records itself); "
        "False: a flat row, whose result is the agent's `/run` body.",
    )
    collection_run: str | None = Field(
        None,
        pattern=COLLECTION_RUN_PATTERN,
        max_length=200,
        description="The collection run the episode belongs to (the environment server's `collection_run`): "
        "in a named run, a resume's re-dispatch of a settled episode gets its outcome, not a second rollout.",
    )

    @property
    def task_digest(self) -> str:
        """With the rollout id, the episode's identity at the agent (what a cancel names)."""
        return task_digest(self.row, self.collection_run)


class EpisodeCancelRequest(BaseModel):
    """`POST /v1/episodes/cancel` on the agent: stop the episode's rollout if it still runs."""

    model_config = ConfigDict(extra="forbid")

    episode_id: EpisodeId
    task_digest: str = Field(
        pattern=r"^[0-9a-f]{32}$",
        description="The digest of the task the episode runs (`EpisodeRunRequest.task_digest`): Gym's "
        "rollout ids repeat across tasks and collection runs, so the id alone names no one rollout.",
    )
    reason: str = Field("cancelled by the environment server", max_length=500)


class EpisodeCancelResponse(BaseModel):
    cancelled: bool = Field(
        description="A rollout was running and is now stopped and released; False when the episode "
        "had settled, never ran, or another attempt of it still waits on its rollout."
    )
