# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""What a rollout job is, as submitted, as seen by handlers, and as reported when it ends."""

from __future__ import annotations

import hashlib
import json
import uuid
from enum import StrEnum
from functools import cached_property
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class Stage(StrEnum):
    INIT = "init"
    RUN = "run"
    EVAL = "eval"

    @property
    def critical_error(self) -> CriticalError:
        """The `critical_error` of a job that failed in this stage."""
        return _STAGE_ERRORS[self]


class JobState(StrEnum):
    QUEUED = "queued"  # accepted, waiting for an INIT worker
    INIT = "init"
    RUN = "run"
    EVAL = "eval"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def terminal(self) -> bool:
        return self in (JobState.DONE, JobState.FAILED, JobState.CANCELLED)


TERMINAL_STATES = frozenset({JobState.DONE, JobState.FAILED, JobState.CANCELLED})

CriticalError = Literal["init", "run", "eval", "timeout"]

_STAGE_ERRORS: dict[Stage, CriticalError] = {Stage.INIT: "init", Stage.RUN: "run", Stage.EVAL: "eval"}

FailureKind = Literal["infrastructure", "data"]


class FailureClass(BaseModel):
    """Whose fault a failed job was, as its handler classified it (`RolloutFailure`): trainers
    retry infrastructure failures and drop data failures; `status` is the HTTP status a caller
    answering for the job should give."""

    kind: FailureKind
    status: int = Field(ge=400, le=599)
    message: str
    code: str | None = None  # the API error code to answer with (default `<kind>_failure`)


class Budget(BaseModel):
    """Time limits of one job. `None` means: the pipeline's configured default."""

    model_config = ConfigDict(extra="forbid")

    active_time_s: float | None = Field(
        None, gt=0, description="Limit on time spent inside stages (queue waiting excluded)."
    )
    wall_time_s: float | None = Field(
        None, gt=0, description="Per-request deadline from submission, queue waiting included."
    )


class JobSpec(BaseModel):
    """A job as a client submits it."""

    model_config = ConfigDict(extra="forbid")

    id: str | None = Field(
        None,
        min_length=1,
        max_length=128,
        pattern=r"^[A-Za-z0-9_.:\-]+$",
        description="Client-chosen id (unique among retained jobs); a fresh one if omitted.",
    )
    task: str | None = Field(
        None,
        min_length=1,
        max_length=128,
        description="Task handler name; defaults to `instance['data_source']` (ProRL's convention).",
    )
    instance: dict[str, Any] = Field(default_factory=dict, description="The task instance (dataset row).")
    sampling_params: dict[str, Any] = Field(default_factory=dict)
    priority: int = Field(0, ge=-1000, le=1000, description="Higher runs first (e.g. carried-over jobs).")
    budget: Budget = Field(default_factory=Budget)
    group_id: str | None = Field(None, max_length=256, description="Prompt group (DAPO/GRPO grouping).")
    metadata: dict[str, Any] = Field(default_factory=dict, description="Opaque; echoed in the result.")
    policy_version: int | None = Field(
        None,
        ge=0,
        description="The trainer's step when the trainer owns the weights (NeMo RL refits its own vLLM "
        "workers): the version of every turn the service could not stamp from a published policy.",
    )


class Job(BaseModel):
    """The job as stage handlers see it: id and task resolved, budget filled in."""

    model_config = ConfigDict(frozen=True)

    id: str
    task: str
    instance: dict[str, Any]
    sampling_params: dict[str, Any]
    priority: int
    active_time_s: float
    wall_time_s: float | None
    group_id: str | None
    metadata: dict[str, Any]
    policy_version: int | None = None

    @cached_property
    def digest(self) -> str:
        """What was asked, as a digest: a resubmission of this job's id with the same digest is
        the same job (a client retrying a submit whose answer was lost)."""
        asked = [self.task, self.instance, self.sampling_params, self.group_id, self.policy_version]
        return hashlib.sha256(json.dumps(asked, sort_keys=True, default=str).encode()).hexdigest()


def new_job_id() -> str:
    return uuid.uuid4().hex


class Trajectory(BaseModel):
    """What RUN produces, and all EVAL and the callers read of it: every field the rollout path
    writes is declared here, so the handoff from RUN to EVAL is typed end to end.

    `response` is the transport's own answer for its caller (NeMo Gym: the Responses-API
    response `/verify` scores and `/run` returns); `observations` is what the transport's
    observability recorded of the rollout. Per-turn fields live in `messages`; a field that
    concerns every turn (e.g. the policy version that generated it) goes there or here, typed.
    Extra fields are still accepted from third-party handlers that return plain dicts.
    """

    model_config = ConfigDict(extra="allow")

    messages: list[dict[str, Any]] = Field(default_factory=list)
    tools: list[dict[str, Any]] = Field(default_factory=list)
    finish: bool = Field(False, description="The agent ended with its finish action / final answer.")
    end_properly: bool = Field(False, description="Stopped for a normal reason (not a budget or error).")
    stop_reason: str | None = None
    final_answer: str | None = None
    artifacts: dict[str, Any] = Field(default_factory=dict, description="What EVAL needs from RUN's sandbox.")
    git_patch: str | None = Field(None, description="SWE: the patch (ProRL's result carries it on top).")
    steps: list[dict[str, Any]] = Field(default_factory=list, description="One per tool call.")
    num_turns: int = 0
    generated_tokens: int = 0
    tool_errors: int = Field(0, description="Tool calls that ended in an error observation.")
    http_retries: int = 0
    reroutes: list[dict[str, Any]] = Field(default_factory=list)
    infrastructure_failed: bool = Field(False, description="Inference died mid-trajectory (masked).")
    failure: dict[str, Any] | None = Field(None, description="The inference failure, when there was one.")
    decoding: dict[str, Any] | None = None
    response: dict[str, Any] | None = Field(None, description="The transport's response body (Gym: /run's).")
    observations: dict[str, Any] | None = Field(None, description="The transport's observability record.")
    harness: dict[str, Any] | None = Field(
        None, description="A harness's rollout: name, exit status, calls, token segments, merged share."
    )
    policy_versions: list[int] = Field(
        default_factory=list, description="The policy versions its model calls used, in order (base: 0)."
    )


class Evaluation(BaseModel):
    """What EVAL produces: the scalar reward ProRL drops, its parts, and a free-form report."""

    model_config = ConfigDict(extra="forbid")

    reward: float
    reward_components: dict[str, float] = Field(default_factory=dict)
    resolved: bool | None = None
    report: dict[str, Any] = Field(default_factory=dict)


class Timing(BaseModel):
    """Seconds. Stage times are active time; `*_wait` are queue waits before each stage."""

    init_time: float = 0.0
    run_time: float = 0.0
    eval_time: float = 0.0
    init_wait: float = 0.0
    run_wait: float = 0.0
    eval_wait: float = 0.0
    others_time: float = Field(0.0, description="Resource release and bookkeeping after the stages.")
    model_wait_s: float = Field(
        0.0,
        description="Time inside stages that its model calls waited for a free backend slot: the "
        "service's backpressure, neither stage time nor counted by the active-time budget.",
    )
    counted_elapsed: float = Field(0.0, description="Active time only: what the active-time budget counts.")
    total_elapsed: float = Field(0.0, description="Wall time from submission to the end.")
    timeout_triggered: bool = False


class Attempt(BaseModel):
    """One start of a job on some node (only recorded by executors that place jobs on nodes)."""

    node: str | None = Field(None, description="Where its INIT ran (None: lost before placement).")
    stage: Stage = Field(Stage.INIT, description="The last stage it reached there.")
    lost: str | None = Field(None, description="Why this attempt was lost (infrastructure), if it was.")


class JobResult(BaseModel):
    """State of a job at any time; complete once `state` is terminal."""

    id: str
    task: str
    state: JobState
    waiting: bool = Field(False, description="Queued for `state`'s stage rather than executing it.")
    group_id: str | None = None
    priority: int = 0
    metadata: dict[str, Any] = Field(default_factory=dict)
    instance_id: str | None = None
    submitted_at: float = Field(description="Unix time of submission.")
    digest: str | None = Field(None, description="`Job.digest`: what was submitted under this id.")
    finished_at: float | None = None
    reward: float | None = None
    reward_components: dict[str, float] = Field(default_factory=dict)
    resolved: bool | None = None
    trajectory: Trajectory | None = None
    report: dict[str, Any] = Field(default_factory=dict)
    critical_error: CriticalError | None = None
    error: str | None = None
    failure: FailureClass | None = Field(
        None, description="How the handler classified the failure, when it raised a `RolloutFailure`."
    )
    traceback: str | None = None
    cancel_reason: str | None = None
    mask_sample: bool = Field(
        False, description="The infrastructure failed the job (not the policy): do not train on it."
    )
    attempts: list[Attempt] = Field(
        default_factory=list, description="Each start of the job on a node, the lost ones included."
    )
    infra_retries: int = Field(0, description="Times the job was re-run because its node was lost.")
    resumed: int = Field(
        0,
        description="Times the job was run again from INIT because the service died while it was in "
        "flight and a restarted service took it back from its journal (0: it ran once).",
    )
    policy_versions: list[int] = Field(
        default_factory=list, description="The policy versions its model calls used, in order (base: 0)."
    )
    staleness: int | None = Field(
        None, description="The trainer's version at the end minus the oldest version used (None: unknown)."
    )
    stale: bool = Field(False, description="Past `max_staleness` and kept with this flag (action `flag`).")
    stale_reruns: int = Field(0, description="Times it was run again because it came back too stale.")
    timing: Timing = Field(default_factory=Timing)
