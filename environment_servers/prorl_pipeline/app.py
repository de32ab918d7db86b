# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""prorl_pipeline: NeMo Gym 0.7's environment server in front of the ProRL agent.

Rollout collection sends it flat rows (what NeMo RL and `ng_run` datasets hold) and materialized
episode requests (`episode_id` + `task`). Each episode is one rollout of the agent's pipeline
(INIT -> RUN -> EVAL on the agent's backend pool, policy versions and staleness), reached at the
agent's `/v1/episodes/run`; the answer is Gym's result or a typed `EpisodeFailure` (the table is
`nemo_gym_prorl.integrations.gym.episodes`). Gym's limits hold here: admission
(`max_concurrent_episodes`, `queue_timeout_seconds`), the episode deadline (it becomes the
rollout's wall deadline in the pipeline, a margin earlier, so the pipeline stops the rollout and
releases its sandbox itself), and cleanup: the rollout is a registered cleanup, cancelled (and
its sandbox and resources session released) when the episode fails, times out or is cancelled.

A thin face: the logic is `nemo_gym_prorl.integrations.gym.episodes` and the agent's runtime.
"""

from __future__ import annotations

import contextvars
import uuid
from typing import Any, Self

from aiohttp import ClientError
from fastapi import Body, FastAPI
from fastapi.responses import JSONResponse
from nemo_gym.base_environment_server import (
    BaseEnvironmentServer,
    BaseEnvironmentServerConfig,
    CleanupContext,
    HandledEpisodeError,
)
from nemo_gym.config_types import AgentServerRef, AggregateMetrics, AggregateMetricsRequest
from nemo_gym.episode_types import BaseEpisodeRequest, BaseEpisodeResponse, EpisodeFailure, EpisodeId
from nemo_gym.global_config import AGENT_REF_KEY_NAME, ATTEMPT_INDEX_KEY_NAME, TASK_SOURCE_KEY_NAME
from nemo_gym.rollout_correlation import maybe_rollout_id_from_run_body
from nemo_gym.server_utils import get_response_json, is_nemo_gym_fastapi_entrypoint, raise_for_status
from nemo_gym.task_materialization import materialize_task
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PositiveFloat,
    PositiveInt,
    ValidationError,
    model_validator,
)

from nemo_gym_prorl.integrations.gym.episodes import (
    EPISODE_CANCEL_PATH,
    EPISODE_PATH,
    EpisodeCancelRequest,
    EpisodeOutcome,
    EpisodeRunRequest,
    flat_failure,
    refused_row,
)


class ProRLTaskInput(BaseModel):
    """A ProRL row as a task: its prompt and the domain's fields (answer, tests, instance, ...),
    which the domain's resources server checks at seed."""

    model_config = ConfigDict(extra="allow")

    # Optional here so that a row without a prompt is refused by the one door check (the agent's,
    # naming `instance.responses_create_params`), not by a second check of this server's own.
    responses_create_params: dict[str, Any] | None = None


class ProRLEpisodeRequest(BaseEpisodeRequest[ProRLTaskInput]):
    """One rollout of a ProRL task."""


class ProRLEpisodeResponse(BaseEpisodeResponse[dict[str, Any]]):
    """The Gym verify response of the rollout (reward, token fields per turn, timing), or a failure."""


class ProRLPipelineEnvironmentServerConfig(BaseEnvironmentServerConfig):
    """Bind the ProRL agent; Gym's episode limits apply to every episode."""

    model_config = ConfigDict(extra="forbid")

    agent_server: AgentServerRef
    max_concurrent_episodes: PositiveInt | None = None
    queue_timeout_seconds: PositiveFloat | None = None
    default_episode_timeout_seconds: PositiveFloat = 3600
    cleanup_timeout_seconds: PositiveFloat = 120
    deadline_margin_seconds: PositiveFloat = Field(
        10,
        description="The rollout's wall deadline in the pipeline is the episode deadline less this, so "
        "the pipeline ends a late rollout (agent_timeout, sandbox released) before Gym's deadline does.",
    )

    @model_validator(mode="after")
    def _margin_inside_deadline(self) -> Self:
        if self.deadline_margin_seconds >= self.default_episode_timeout_seconds:
            raise ValueError("deadline_margin_seconds must be shorter than default_episode_timeout_seconds")
        return self


# The flat row a legacy `/run` carried, for `run` to send on whole (routing keys included): the
# episode request holds only the materialized task.
_FLAT_ROW: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
    "prorl_flat_row", default=None
)


class ProRLPipelineEnvironmentServer(BaseEnvironmentServer[ProRLEpisodeRequest, ProRLEpisodeResponse]):
    config: ProRLPipelineEnvironmentServerConfig
    request_model = ProRLEpisodeRequest
    response_model = ProRLEpisodeResponse

    def setup_webserver(self) -> FastAPI:
        # One `/run` for both shapes, as Gym's collection sends both to the agent's one server.
        app = FastAPI()
        app.post("/run")(self.run_any)
        app.post("/aggregate_metrics", response_model=AggregateMetrics)(self.aggregate_metrics)
        return app

    async def aggregate_metrics(self, body: AggregateMetricsRequest = Body()) -> AggregateMetrics:  # noqa: B008
        """The agent aggregates its own rollouts (each carries its resources server's verify fields)."""
        response = await self.server_client.post(
            server_name=self.config.agent_server.name, url_path="/aggregate_metrics", json=body
        )
        await raise_for_status(response)
        return AggregateMetrics.model_validate(await get_response_json(response))

    async def run_any(self, row: dict[str, Any] = Body()) -> Any:  # noqa: B008
        """An episode request answers Gym's typed response (a row no stage could run: a terminal
        failure at stage `seed`). A flat row answers its result, a row no stage could run a 400
        `invalid_instance` as every door of the project does, and any other failure Gym's
        flat-row failure fields, as `single_agent_turn_legacy` does."""
        flat = not ("episode_id" in row and "task" in row)
        try:
            request = self._episode_request_from_row(row) if flat else ProRLEpisodeRequest.model_validate(row)
        except (ValidationError, ValueError) as exc:
            return JSONResponse({"error": "invalid_request", "reason": str(exc)[:2000]}, status_code=422)
        token = _FLAT_ROW.set(row if flat else None)
        try:
            response = await self.run_request(request)
        finally:
            _FLAT_ROW.reset(token)
        return self._answer(response) if flat else response.model_dump(mode="json", exclude_none=True)

    def _answer(self, response: ProRLEpisodeResponse) -> Any:
        """A flat row's answer: its result, a 400 for a row no stage could run, or Gym's failure fields."""
        agent_ref = {"name": self.config.agent_server.name}
        if response.failure is None:
            assert response.result is not None
            return {**response.result, AGENT_REF_KEY_NAME: agent_ref}
        refusal = refused_row(response.failure)
        if refusal is not None:
            return JSONResponse(refusal, status_code=400)
        return {**flat_failure(response.failure), AGENT_REF_KEY_NAME: agent_ref}

    def _episode_request_from_row(self, row: dict[str, Any]) -> ProRLEpisodeRequest:
        attempt = row.get(ATTEMPT_INDEX_KEY_NAME, 0)
        if not isinstance(attempt, int) or isinstance(attempt, bool) or attempt < 0:
            raise ValueError(f"Invalid episode attempt: {attempt!r}")
        # The rollout's identity without the attempt, so every attempt shares one rollout id.
        rollout_id = maybe_rollout_id_from_run_body({**row, ATTEMPT_INDEX_KEY_NAME: 0})
        task_source = row.get(TASK_SOURCE_KEY_NAME) or self.config.agent_server.name
        task = materialize_task(row, taskset=str(task_source))  # no task id, no index: refused (422)
        return ProRLEpisodeRequest.model_validate(
            {
                "episode_id": EpisodeId(rollout_id=rollout_id or uuid.uuid4().hex, attempt=attempt),
                "task": task,
            }
        )

    async def run(self, request: ProRLEpisodeRequest, cleanup: CleanupContext) -> ProRLEpisodeResponse:
        episode = request.episode_id
        agent = self.config.agent_server.name

        async def cancel_rollout() -> None:
            body = EpisodeCancelRequest(episode_id=episode, reason="the episode ended without its result")
            response = await self.server_client.post(
                server_name=agent, url_path=EPISODE_CANCEL_PATH, json=body.model_dump(mode="json")
            )
            await raise_for_status(response)

        # Registered before the rollout starts: a reply lost mid-run still stops and releases it.
        cleanup.register_cleanup(f"prorl rollout {episode.capture_key}", cancel_rollout)
        flat = _FLAT_ROW.get()
        row = flat if flat is not None else request.task.task_input.model_dump(mode="json")
        deadline = self.config.default_episode_timeout_seconds - self.config.deadline_margin_seconds
        run = EpisodeRunRequest(episode_id=episode, row=row, wall_time_s=deadline, materialized=flat is None)
        try:
            response = await self.server_client.post(
                server_name=agent, url_path=EPISODE_PATH, json=run.model_dump(mode="json")
            )
            status, body = response.status, await get_response_json(response)
        except (ClientError, OSError) as exc:
            raise HandledEpisodeError(
                EpisodeFailure(
                    failure_reason=f"the agent {agent!r} did not answer: {type(exc).__name__}: {exc}"[:2000],
                    terminal=False,
                    failure_kind="transport_unreachable",
                )
            ) from exc
        if status != 200:
            raise HandledEpisodeError(
                EpisodeFailure(
                    failure_reason=f"the agent {agent!r} answered HTTP {status}: {str(body)[:1500]}",
                    terminal=status < 500,  # a request it refused will be refused again
                    failure_kind="agent_request_failed" if status < 500 else "agent_run_error",
                    stage="agent",
                )
            )
        outcome = EpisodeOutcome.model_validate(body)
        if outcome.failure is not None:
            raise HandledEpisodeError(outcome.failure)
        return ProRLEpisodeResponse(episode_id=episode, task_id=request.task.task_id, result=outcome.result)


if __name__ == "__main__":
    ProRLPipelineEnvironmentServer.run_webserver()
elif is_nemo_gym_fastapi_entrypoint(__file__):
    app = ProRLPipelineEnvironmentServer.run_webserver()
