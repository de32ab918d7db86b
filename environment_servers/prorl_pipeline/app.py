# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""prorl_pipeline: NeMo Gym 0.7's environment server in front of the ProRL agent.

Rollout collection sends it flat rows (what NeMo RL and `ng_run` datasets hold) and materialized
episode requests (`episode_id` + `task`). Each episode is one rollout of the agent's pipeline
(INIT -> RUN -> EVAL on the agent's backend pool, policy versions and staleness), reached at the
agent's `/v1/episodes/run`; the answer is Gym's result or a typed `EpisodeFailure` (the table is
`nemo_gym_prorl.integrations.gym.episodes`); a flat row answers Gym's flat shape
(`nemo_gym_prorl.integrations.gym.flat_rows`). Gym's limits hold here: admission
(`max_concurrent_episodes`, `queue_timeout_seconds`), the episode deadline (it becomes the
rollout's wall deadline in the pipeline, a margin earlier, so the pipeline stops the rollout and
releases its sandbox itself), and cleanup: the rollout is a registered cleanup, cancelled (and
its sandbox and resources session released) when the episode fails, times out or is cancelled
before the agent answered; after an answer the rollout has ended, and the cleanup does nothing.

`collection_run` names the collection run this server's episodes belong to (Gym 0.7 has no such
identity: it numbers rollouts afresh in every run). Named, a resumed collection's re-dispatch of
an episode that settled gets its outcome from the agent's ledger instead of a second rollout,
and an episode whose collector went away (a killed collection) keeps its rollout running for
the resume to collect.

A thin face: the logic is `nemo_gym_prorl.integrations.gym` (episodes, flat_rows) and the agent's
runtime.
"""

from __future__ import annotations

import asyncio
import contextvars
import uuid
from collections.abc import Mapping
from typing import Annotated, Any, Self

from aiohttp import ClientError
from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from nemo_gym.base_environment_server import (
    BaseEnvironmentServer,
    BaseEnvironmentServerConfig,
    CleanupContext,
    HandledEpisodeError,
)
from nemo_gym.config_types import AgentServerRef, AggregateMetrics, AggregateMetricsRequest
from nemo_gym.episode_types import BaseEpisodeRequest, BaseEpisodeResponse, EpisodeFailure, EpisodeId
from nemo_gym.global_config import AGENT_REF_KEY_NAME, ATTEMPT_INDEX_KEY_NAME
from nemo_gym.rollout_correlation import maybe_rollout_id_from_run_body
from nemo_gym.server_utils import get_response_json, is_nemo_gym_fastapi_entrypoint, raise_for_status
from nemo_gym.task_materialization import materialize_task
from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    PositiveFloat,
    PositiveInt,
    Tag,
    model_validator,
)

from nemo_gym_prorl.integrations.gym.collection_keys import NG_FAILURE_CLASS_KEY
from nemo_gym_prorl.integrations.gym.episodes import (
    COLLECTION_RUN_PATTERN,
    EPISODE_CANCEL_PATH,
    EPISODE_PATH,
    EpisodeCancelRequest,
    EpisodeOutcome,
    EpisodeRunRequest,
)
from nemo_gym_prorl.integrations.gym.flat_rows import FlatFailure, FlatResult, FlatRow
from nemo_gym_prorl.server_paths import redact_server_paths
from nemo_gym_prorl.service.errors import RedactErrorBodies


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
    collection_run: str | None = Field(
        None,
        pattern=COLLECTION_RUN_PATTERN,
        max_length=200,
        description="The collection run this server's episodes belong to, and its resumes "
        "(`resume_from_cache`). Named, a re-dispatch of an episode that settled in the run gets the "
        "settled outcome instead of a second rollout, and a rollout whose collector went away keeps "
        "running for the resume. Unset: attempt 0 of a settled episode runs anew (Gym numbers rollouts "
        "afresh in every run, so it may be a new collection's), and a collector that goes away cancels "
        "its rollouts. Give each new collection its own name: under one name, a fresh collection of "
        "the same rows is answered from the ledger too.",
    )

    @model_validator(mode="after")
    def _margin_inside_deadline(self) -> Self:
        if self.deadline_margin_seconds >= self.default_episode_timeout_seconds:
            raise ValueError("deadline_margin_seconds must be shorter than default_episode_timeout_seconds")
        return self


def _row_shape(body: Any) -> str | None:
    """An episode request (`episode_id` + `task`) or a flat row, as Gym's collection tells them
    apart; a body that is no object at all has no shape (422)."""
    if isinstance(body, ProRLEpisodeRequest):
        return "episode"
    if isinstance(body, FlatRow):
        return "flat"
    if not isinstance(body, dict):
        return None
    return "episode" if "episode_id" in body and "task" in body else "flat"


def _answer_shape(answer: Any) -> str:
    if isinstance(answer, ProRLEpisodeResponse) or (isinstance(answer, dict) and "episode_id" in answer):
        return "episode"
    if isinstance(answer, FlatFailure) or (isinstance(answer, dict) and NG_FAILURE_CLASS_KEY in answer):
        return "failure"
    return "result"


RunBody = Annotated[
    Annotated[ProRLEpisodeRequest, Tag("episode")] | Annotated[FlatRow, Tag("flat")],
    Discriminator(_row_shape),
]
RunAnswer = Annotated[
    Annotated[ProRLEpisodeResponse, Tag("episode")]
    | Annotated[FlatFailure, Tag("failure")]
    | Annotated[FlatResult, Tag("result")],
    Discriminator(_answer_shape),
]

# The flat row a `/run` carried, for `run` to send on whole (routing keys included): the episode
# request Gym's `run_request` takes holds only the materialized task.
_FLAT_ROW: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
    "prorl_flat_row", default=None
)


class ProRLPipelineEnvironmentServer(BaseEnvironmentServer[ProRLEpisodeRequest, ProRLEpisodeResponse]):
    config: ProRLPipelineEnvironmentServerConfig
    request_model = ProRLEpisodeRequest
    response_model = ProRLEpisodeResponse

    def setup_webserver(self) -> FastAPI:
        # Gym's own routes take episode requests only; collection posts both shapes to the one
        # `/run` of an agent's environment server, so `/run` takes (and documents) both.
        app = FastAPI()
        app.post("/run", response_model_exclude_unset=True)(self.run_any)
        app.post("/aggregate_metrics")(self.aggregate_metrics)
        return app

    def setup_exception_middleware(self, app: FastAPI) -> None:
        super().setup_exception_middleware(app)
        # Outside Gym's own, which answers an unhandled exception with its repr, paths and all.
        app.add_middleware(RedactErrorBodies)

    def failure_response(self, request: ProRLEpisodeRequest, failure: EpisodeFailure) -> ProRLEpisodeResponse:
        """Every failure this server answers passes here (refused, timed out, the agent's, an
        unhandled error's text): it says what failed, never where the server keeps its files."""
        reason = redact_server_paths(failure.failure_reason)
        return super().failure_response(request, failure.model_copy(update={"failure_reason": reason}))

    async def aggregate_metrics(self, body: AggregateMetricsRequest) -> AggregateMetrics:
        """The agent aggregates its own rollouts (each carries its resources server's verify fields)."""
        response = await self.server_client.post(
            server_name=self.config.agent_server.name, url_path="/aggregate_metrics", json=body
        )
        await raise_for_status(response)
        return AggregateMetrics.model_validate(await get_response_json(response))

    async def run_any(self, body: RunBody) -> RunAnswer:
        """An episode request answers Gym's typed response. A flat row answers its result, or
        Gym's flat-row failure fields as `single_agent_turn_legacy` does: a row no stage could run
        is a terminal failure at stage `seed` naming what is wrong, which collection records once
        and never dispatches again. A row routed to the wrong agent, or without a task identity,
        is refused (422)."""
        if isinstance(body, ProRLEpisodeRequest):
            return await self.run_request(body)
        row = body.row()
        try:
            request = self._episode_request_from_row(body, row)
        except ValueError as exc:
            raise RequestValidationError(
                [{"type": "value_error", "loc": ("body",), "msg": str(exc)}]
            ) from exc
        token = _FLAT_ROW.set(row)
        try:
            response = await self.run_request(request)
        finally:
            _FLAT_ROW.reset(token)
        agent = self.config.agent_server.name
        if response.failure is not None:
            return FlatFailure.of(response.failure, agent)
        assert response.result is not None  # Gym's response holds exactly one
        return FlatResult.model_validate({**response.result, AGENT_REF_KEY_NAME: {"name": agent}})

    def _episode_request_from_row(self, body: FlatRow, row: dict[str, Any]) -> ProRLEpisodeRequest:
        taskset = body.taskset(self.config.agent_server.name, self._bound_instances())
        # The rollout's identity without the attempt, so every attempt shares one rollout id.
        rollout_id = maybe_rollout_id_from_run_body({**row, ATTEMPT_INDEX_KEY_NAME: 0})
        task = materialize_task(row, taskset=taskset)  # no task id, no index: ValueError
        return ProRLEpisodeRequest.model_validate(
            {
                "episode_id": EpisodeId(rollout_id=rollout_id or uuid.uuid4().hex, attempt=body.attempt),
                "task": task,
            }
        )

    def _bound_instances(self) -> frozenset[str]:
        """The instances a row's `task_source` may name: the agent, this server, and the resources
        servers the agent serves (collation names whichever declared the dataset)."""
        agent = self.config.agent_server.name
        names = {agent, self.config.name}
        block = self.server_client.global_config_dict.get(agent)
        agents = block.get("responses_api_agents") if isinstance(block, Mapping) else None
        for settings in (agents or {}).values():
            refs = [settings.get("resources_server"), *(settings.get("resources_servers") or {}).values()]
            names |= {str(ref["name"]) for ref in refs if isinstance(ref, Mapping) and ref.get("name")}
        return frozenset(names)

    async def run(self, request: ProRLEpisodeRequest, cleanup: CleanupContext) -> ProRLEpisodeResponse:
        episode = request.episode_id
        agent = self.config.agent_server.name

        flat = _FLAT_ROW.get()
        row = flat if flat is not None else request.task.task_input.model_dump(mode="json")
        deadline = self.config.default_episode_timeout_seconds - self.config.deadline_margin_seconds
        named_run = self.config.collection_run
        run = EpisodeRunRequest(
            episode_id=episode,
            row=row,
            wall_time_s=deadline,
            materialized=flat is None,
            collection_run=named_run,
        )
        settled = False
        cancelled = False

        async def cancel_rollout() -> None:
            if settled:  # the agent answered, so its rollout has ended: nothing to stop
                return
            if cancelled and named_run is not None:
                # The collection was stopped, not the episode: the run's resume collects the
                # rollout (joined while it runs, its outcome once settled), so it is left to finish
                # within its own wall deadline.
                return
            cancel = EpisodeCancelRequest(
                episode_id=episode, task_digest=run.task_digest, reason="the episode ended without its result"
            )
            response = await self.server_client.post(
                server_name=agent, url_path=EPISODE_CANCEL_PATH, json=cancel.model_dump(mode="json")
            )
            await raise_for_status(response)

        # Registered before the rollout starts: a reply lost mid-run still stops and releases it.
        cleanup.register_cleanup(f"prorl rollout {episode.capture_key}", cancel_rollout)
        try:
            response = await self.server_client.post(
                server_name=agent, url_path=EPISODE_PATH, json=run.model_dump(mode="json")
            )
            status, body = response.status, await get_response_json(response)
        except asyncio.CancelledError:
            # Gym cancels an episode whose caller went away (its disconnect middleware), or whose
            # deadline passed: that one's rollout has met its own wall deadline, a margin earlier.
            cancelled = True
            raise
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
        settled = True
        if outcome.failure is not None:
            raise HandledEpisodeError(outcome.failure)
        return ProRLEpisodeResponse(episode_id=episode, task_id=request.task.task_id, result=outcome.result)


if __name__ == "__main__":
    ProRLPipelineEnvironmentServer.run_webserver()
elif is_nemo_gym_fastapi_entrypoint(__file__):
    app = ProRLPipelineEnvironmentServer.run_webserver()
