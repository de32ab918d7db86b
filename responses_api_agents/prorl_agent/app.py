# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""prorl_agent: a NeMo Gym agent whose `/run` takes a dataset row through the ProRL pipeline
(INIT `/seed_session` -> RUN token-exact agent loop -> EVAL `/verify`) and answers the Gym verify
response with token fields on every generated item. The same process serves the project's
rollout API (`/v1/rollouts`, ProRL's `/process`, `/status`, `/metrics`).

A thin face: the logic is `nemo_gym_prorl.integrations.gym` (runtime, transport, config).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import AsyncIterator
from typing import Any

from fastapi import Body, FastAPI, Request
from fastapi.responses import JSONResponse
from nemo_gym.base_resources_server import BaseRunRequest
from nemo_gym.base_responses_api_agent import BaseResponsesAPIAgentConfig, SimpleResponsesAPIAgent
from nemo_gym.config_types import ModelServerRef, ResourcesServerRef
from nemo_gym.openai_utils import NeMoGymResponse, NeMoGymResponseCreateParamsNonStreaming
from omegaconf import OmegaConf
from pydantic import ConfigDict, Field, PrivateAttr, model_validator

from nemo_gym_prorl.integrations.gym.config import ProRLAgentSettings, resolve_model_access
from nemo_gym_prorl.integrations.gym.episodes import (
    EPISODE_CANCEL_PATH,
    EPISODE_PATH,
    EpisodeCancelRequest,
    EpisodeCancelResponse,
    EpisodeOutcome,
    EpisodeRunRequest,
)
from nemo_gym_prorl.integrations.gym.observability import capture_dir
from nemo_gym_prorl.integrations.gym.runtime import ProRLGymRuntime
from nemo_gym_prorl.integrations.gym.transport import GymServerClient
from nemo_gym_prorl.integrations.nemo_rl.result import answer_for_trainer
from nemo_gym_prorl.server_paths import redact_server_paths, redact_strings
from nemo_gym_prorl.service.errors import RedactErrorBodies, install_error_handlers


class ProRLAgentConfig(BaseResponsesAPIAgentConfig, ProRLAgentSettings):
    """Gym's agent config plus the agent's own settings (`ProRLAgentSettings`: `llm`,
    `pipeline`, `agent`, `rollout_timeout_s`), embedded as they are."""

    model_config = ConfigDict(extra="ignore")

    @model_validator(mode="before")
    @classmethod
    def _moved_keys(cls, data: Any) -> Any:
        # Extra keys are ignored (Gym's own config may carry more); a key that moved is not.
        if isinstance(data, dict) and "sampling" in data:
            raise ValueError("`sampling` moved to `llm.sampling` (the service's LLM settings)")
        return data

    model_server: ModelServerRef
    resources_server: ResourcesServerRef | None = Field(
        None, description="the default resources server (rows without a known data_source)"
    )
    resources_servers: dict[str, ResourcesServerRef] = Field(
        default_factory=dict, description="data_source -> resources server; one agent serves many"
    )
    rollout_api: bool = Field(True, description="also serve the rollout API (/v1/rollouts, /process, ...)")
    rollout_api_token: str | None = Field(None, min_length=8, description="bearer token for the rollout API")


class ProRLAgentRunRequest(BaseRunRequest):
    model_config = ConfigDict(extra="allow")


class ProRLAgent(SimpleResponsesAPIAgent):
    # Gym would join its Ray cluster at start for every config; the agent joins it only with
    # `executor.kind=ray` (its executor reads Gym's ray_head_node_address).
    ray_enabled = False
    config: ProRLAgentConfig

    _runtime: ProRLGymRuntime | None = PrivateAttr(default=None)

    # -- wiring -------------------------------------------------------------------------------
    def resources_map(self) -> dict[str, str]:
        servers = {task: ref.name for task, ref in self.config.resources_servers.items()}
        if (
            self.config.resources_server is not None
            and self.config.resources_server.name not in servers.values()
        ):
            servers.setdefault(self.config.resources_server.name, self.config.resources_server.name)
        return servers

    @property
    def runtime(self) -> ProRLGymRuntime:
        if self._runtime is None:
            cfg = self.config
            global_config = self.server_client.global_config_dict
            access = resolve_model_access(cfg.llm, global_config, cfg.model_server.name)
            settings = ProRLAgentSettings.model_validate(
                cfg.model_dump(include=set(ProRLAgentSettings.model_fields))
            )
            default = cfg.resources_server.name if cfg.resources_server is not None else None
            # Plain data, so that a Ray node's rollout actor can rebuild the same client.
            clients = functools.partial(
                GymServerClient.from_config,
                self.server_client.head_server_config.model_dump(mode="json"),
                OmegaConf.to_container(global_config, resolve=True),
                connection_retries=cfg.resources_connection_retries,
            )
            self._runtime = ProRLGymRuntime(
                settings,
                self.resources_map(),
                clients,
                access,
                default_task=default,
                model_call_capture_dir=capture_dir(global_config),
                gym_head_address=global_config.get("ray_head_node_address"),
            )
        return self._runtime

    def setup_webserver(self) -> FastAPI:
        app = super().setup_webserver()
        runtime = self.runtime

        @contextlib.asynccontextmanager
        async def lifespan(_: FastAPI) -> AsyncIterator[None]:
            await runtime.start()
            try:
                yield
            finally:
                await runtime.close()

        app.router.lifespan_context = lifespan
        app.post(EPISODE_PATH, response_model=EpisodeOutcome)(self.run_episode)
        app.post(EPISODE_CANCEL_PATH, response_model=EpisodeCancelResponse)(self.cancel_episode)
        if self.config.rollout_api:
            self._add_rollout_api(app, runtime)
        return app

    def setup_exception_middleware(self, app: FastAPI) -> None:
        super().setup_exception_middleware(app)
        # Outside Gym's own, which answers an unhandled exception with its repr, paths and all.
        app.add_middleware(RedactErrorBodies)

    def _add_rollout_api(self, app: FastAPI, runtime: ProRLGymRuntime) -> None:
        """Mount the stack's own rollout router (not a copy); Gym keeps its liveness routes and
        its handlers for malformed requests, the stack's errors answer from the stack's table."""
        app.include_router(runtime.stack.router(token=self.config.rollout_api_token))
        install_error_handlers(app, request_errors=False)

    # -- Gym endpoints ------------------------------------------------------------------------
    async def run(self, request: Request, body: ProRLAgentRunRequest) -> JSONResponse:
        row = body.model_dump(mode="json")
        # NeMo Gym 0.7 sends capture_rollout_id; the Gym commit NeMo RL pins has no such field.
        capture_rollout_id = getattr(body, "capture_rollout_id", None)
        if capture_rollout_id is not None:
            row["_ng_rollout_id"] = capture_rollout_id
        outcome = await self.runtime.run(row)
        # A refusal or a failure says what went wrong, not where the server keeps its files.
        body = outcome.body if outcome.status == 200 else redact_strings(outcome.body)
        status, answer = answer_for_trainer(outcome.status, body, row, self.config.infrastructure_failures)
        headers = outcome.headers if status == outcome.status else None
        return JSONResponse(answer, status_code=status, headers=headers)

    async def run_episode(self, body: EpisodeRunRequest) -> EpisodeOutcome:
        """One episode for the environment server (`environment_servers/prorl_pipeline`): Gym's
        result or a typed failure, one rollout per `rollout_id` whatever the attempt (and, in a
        named collection run, whatever resumes it)."""
        outcome = await self.runtime.run_episode(
            body.episode_id,
            body.row,
            body.wall_time_s,
            materialized=body.materialized,
            collection_run=body.collection_run,
        )
        if outcome.failure is None:
            return outcome
        reason = redact_server_paths(outcome.failure.failure_reason)
        return outcome.model_copy(
            update={"failure": outcome.failure.model_copy(update={"failure_reason": reason})}
        )

    async def cancel_episode(self, body: EpisodeCancelRequest) -> EpisodeCancelResponse:
        """The environment server's registered cleanup: stop and release the episode's rollout
        (named by its rollout id and task digest), if it still runs."""
        cancelled = await self.runtime.cancel_episode(body.episode_id, body.task_digest, body.reason)
        return EpisodeCancelResponse(cancelled=cancelled)

    async def responses(self, body: NeMoGymResponseCreateParamsNonStreaming = Body()) -> Any:  # noqa: B008 (FastAPI)
        """One agent episode for bare Responses-API parameters, on the default resources server
        (no task fields, so its reward is meaningless): returns the `response` with token fields."""
        outcome = await self.runtime.run({"responses_create_params": dict(body)})
        if outcome.status != 200:
            return JSONResponse(redact_strings(outcome.body), status_code=outcome.status)
        return NeMoGymResponse.model_validate(outcome.body["response"])


if __name__ == "__main__":
    ProRLAgent.run_webserver()
