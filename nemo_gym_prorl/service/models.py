# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Request and response bodies of the rollout API (native `/v1` and ProRL-compatible)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from nemo_gym_prorl.llm.policy import PolicyStatus
from nemo_gym_prorl.llm.staleness import StalenessPolicy
from nemo_gym_prorl.pipeline import JobResult, JobSpec, JobState, PipelineStatus, Timing
from nemo_gym_prorl.service.backends import BackendInfo

MAX_BATCH = 10_000


class ErrorBody(BaseModel):
    error: str = Field(description="Machine-readable error code.")
    reason: str = Field(description="What was wrong, for a human.")
    detail: list[dict[str, Any]] | None = None


# -- native API -------------------------------------------------------------------------------
class SubmitRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    jobs: list[JobSpec] = Field(min_length=1, max_length=MAX_BATCH)


class SubmitResponse(BaseModel):
    ids: list[str]


class WaitRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    ids: list[str] = Field(min_length=1, max_length=MAX_BATCH)
    timeout_s: float = Field(30.0, ge=0, le=600, description="Long-poll limit.")
    mode: Literal["all", "any"] = Field("all", description="Return when all (or any) have finished.")


class WaitResponse(BaseModel):
    results: list[JobResult]
    pending: list[str] = Field(description="Known ids not finished when the wait ended.")
    missing: dict[str, str] = Field(default_factory=dict, description="Unknown or evicted ids, with why.")


class StreamRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    ids: list[str] = Field(min_length=1, max_length=MAX_BATCH)
    timeout_s: float = Field(3600.0, ge=0, le=86_400)


class StreamLine(BaseModel):
    """One NDJSON line of `/v1/rollouts/stream`."""

    type: Literal["result", "missing", "end"]
    result: JobResult | None = None
    id: str | None = None
    reason: str | None = None
    pending: list[str] | None = None


def result_line(result: JobResult, held_json: bytes | None = None) -> bytes:
    """The `result` line of `result`; from `held_json` (the result's JSON as the pipeline holds
    it) when given, with the layout `StreamLine` itself writes, rather than serialising the
    result a second time."""
    if held_json is None:
        return StreamLine(type="result", result=result).model_dump_json().encode() + b"\n"
    return b'{"type":"result","result":' + held_json + b',"id":null,"reason":null,"pending":null}\n'


class BackendRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    url: str = Field(min_length=1, max_length=2048, description="http(s)://host:port or host:port")
    options: dict[str, Any] = Field(default_factory=dict)


class BackendsResponse(BaseModel):
    backends: list[BackendInfo]


class StatusResponse(BaseModel):
    accepting: bool
    tasks: list[str]
    pipeline: PipelineStatus
    backends: list[BackendInfo]


# -- ProRL-compatible API ---------------------------------------------------------------------
class AddServerRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")  # ProRL clients may send more; unknown keys are ignored

    address: str = Field(min_length=1, max_length=2048)


class CancelRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    job_id: str = Field(min_length=1, max_length=128)


class ProcessRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    instance: dict[str, Any] = Field(description="Task instance; `data_source` selects the handler.")
    sampling_params: dict[str, Any] = Field(default_factory=dict)
    job_id: str | None = Field(None, min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.:\-]+$")
    timeout: float | None = Field(
        None, gt=0, le=86_400, description="Per-request limit in seconds (504 when exceeded)."
    )
    priority: int = Field(0, ge=-1000, le=1000)
    group_id: str | None = Field(None, max_length=256)

    def job_spec(self) -> JobSpec:
        """The one job this request runs (`timeout` bounds the wait, not the job)."""
        fields = self.model_dump(include={"instance", "sampling_params", "priority", "group_id"})
        return JobSpec(id=self.job_id, **fields)


class ProcessResult(BaseModel):
    """ProRL Agent's `/process` result, plus the scalar reward it drops (`reward`, `score`)."""

    job_id: str
    state: JobState
    instance_id: str
    trajectory_id: str
    git_patch: str | None = None
    success: bool
    error: str | None = None
    finish: bool
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    end_properly: bool
    resolved: bool
    critical_error: str | None = None
    traceback: str | None = None
    filter: bool = Field(description="True when the sample should not be trained on (no valid result).")
    timing: Timing
    reward: float | None = None
    score: float = Field(description="reward, or 0.0 when there is none (what ProRL trainers read).")
    reward_components: dict[str, float] = Field(default_factory=dict)

    @classmethod
    def from_result(cls, result: JobResult) -> ProcessResult:
        traj = result.trajectory
        patch = traj.git_patch if traj is not None else None
        return cls(
            job_id=result.id,
            state=result.state,
            instance_id=result.instance_id or result.id,
            trajectory_id=result.id,
            git_patch=patch if isinstance(patch, str) else None,
            success=result.state is JobState.DONE,
            error=result.error or result.cancel_reason,
            finish=traj.finish if traj else False,
            messages=traj.messages if traj else [],
            tools=traj.tools if traj else [],
            end_properly=traj.end_properly if traj else False,
            resolved=bool(result.resolved),
            critical_error=result.critical_error,
            traceback=result.traceback,
            # Not trainable: no valid result, or the evaluator says the infrastructure failed.
            filter=result.state is not JobState.DONE or bool(result.report.get("mask_sample")),
            timing=result.timing,
            reward=result.reward,
            score=result.reward if result.reward is not None else 0.0,
            reward_components=result.reward_components,
        )


class ProrlStatus(BaseModel):
    running: bool
    llm_servers: list[str]
    num_llm_servers: int
    pipeline: PipelineStatus


class Ack(BaseModel):
    status: Literal["ok"] = "ok"
    message: str


class PolicyResponse(BaseModel):
    """`GET /v1/policy`: the trainer's version rollouts are judged against, what the backends
    serve, and the staleness bound."""

    trainer_version: int | None = Field(
        description="The newest of the published version and the trainer steps submissions carried."
    )
    served: PolicyStatus
    staleness: StalenessPolicy
