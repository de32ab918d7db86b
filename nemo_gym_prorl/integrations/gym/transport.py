# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""A rollout whose tools and scoring live in a NeMo Gym resources server, reached over HTTP.

    SUBMIT POST <server>/check_instance (row)        the domain's check, nothing opened
    INIT  POST <server>/seed_session (row)           cookies kept per rollout
    RUN   each tool call is a POST to <server>/<tool> with those cookies
    EVAL  POST <server>/verify (row + response)      the server then closes its session
    release: POST /close_session when /verify was never reached (cancelled, failed)

Every call is made in the job's rollout context (Gym's `rollout_context`, the rollout id of its
`/run` row): Gym's client then prefixes each path with `/ng-rollout/<id>` when observability is
on, so the server's records of seed, tool and verify calls name their rollout. Gym sets that
context only around `/run` itself, and the stages run in the pipeline's workers (or on a Ray
node), outside it; /verify alone would otherwise be named, from its body.

At submit, the rollout API (`service.core`) awaits `check_instance`: the resources server's own
check of the row, the one `/seed_session` runs, so every door of the agent refuses what no stage
could run (400 `invalid_instance`) before anything is queued. A server without that route (not
one of this project's) checks at `/seed_session` only; one that cannot be reached is answered 503.

The handler above it (`agent.handler.AgentRolloutHandler`) is the same one `prorl serve` runs;
this module is only the transport. Tool calls are checked here with the same vocabulary as
in-process tools (`tools.dispatch`: unknown tool, arguments that are not JSON or do not fit the
schema), so the model reads the same observation on both paths.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from nemo_gym.rollout_correlation import rollout_context
from pydantic import ValidationError

from nemo_gym_prorl.agent.handler import ToolServiceUnavailableError
from nemo_gym_prorl.agent.loop import AgentTrajectory
from nemo_gym_prorl.integrations.gym import observability
from nemo_gym_prorl.integrations.gym.response import chat_tool_specs, gym_response
from nemo_gym_prorl.pipeline import Evaluation, Job, RolloutFailure, Trajectory
from nemo_gym_prorl.pipeline.handler import INVALID_INSTANCE, InvalidInstanceError
from nemo_gym_prorl.sandbox.base import ExecResult
from nemo_gym_prorl.tools.dispatch import ToolObservation, decode_arguments, invalid_arguments, unknown_tool
from nemo_gym_prorl.tools.specs import ALL_TOOLS, ARGUMENT_MODELS


class ResourcesReply(NamedTuple):
    status: int
    body: Any
    cookies: dict[str, str]


class ResourcesUnavailableError(ToolServiceUnavailableError):
    """The resources server could not be reached (connection refused, reset, timeout)."""


class ResourcesClient(Protocol):
    """POST to a resources server by instance name, with per-rollout cookies."""

    async def post(self, server: str, path: str, body: Any, cookies: Mapping[str, str]) -> ResourcesReply: ...

    def base_url(self, server: str) -> str | None:
        """Where the server listens (for reachability checks on other nodes); None if unknown."""
        ...


class GymServerClient:
    """A `ResourcesClient` over NeMo Gym's `ServerClient` (aiohttp, names resolved from the
    global config)."""

    def __init__(self, server_client: Any, *, connection_retries: int | None = None) -> None:
        self.server_client = server_client
        # Gym retries a refused or reset connection forever by default (a server may still be
        # starting); a rollout gives up after this many and fails as infrastructure.
        self.connection_retries = connection_retries

    @classmethod
    def from_config(
        cls,
        head_server: Mapping[str, Any],
        global_config: Mapping[str, Any],
        *,
        connection_retries: int | None = None,
    ) -> GymServerClient:
        """Gym's client rebuilt from plain config data, also in a process Gym did not start (a
        Ray node's rollout actor): the same name resolution, over Gym's shared aiohttp client."""
        from nemo_gym.config_types import BaseServerConfig
        from nemo_gym.server_utils import ServerClient
        from omegaconf import OmegaConf

        config = OmegaConf.create(dict(global_config))
        head = BaseServerConfig.model_validate(dict(head_server))
        return cls(
            ServerClient(head_server_config=head, global_config_dict=config),
            connection_retries=connection_retries,
        )

    def base_url(self, server: str) -> str | None:
        from nemo_gym.global_config import get_first_server_config_dict

        try:
            config = get_first_server_config_dict(self.server_client.global_config_dict, server)
            return f"http://{config.host}:{config.port}"
        except Exception:  # not in the global config: Gym's own request will say so
            return None

    def _ensure_session(self) -> None:
        """Gym makes its shared aiohttp client on first use from the config of the process Gym
        started; a process it did not start (a Ray actor) gets one from this client's config."""
        from nemo_gym.server_utils import (
            GlobalAIOHTTPAsyncClientConfig,
            is_global_aiohttp_client_setup,
            set_global_aiohttp_client,
        )
        from omegaconf import OmegaConf

        if not is_global_aiohttp_client_setup():
            settings = OmegaConf.to_container(self.server_client.global_config_dict, resolve=True)
            set_global_aiohttp_client(GlobalAIOHTTPAsyncClientConfig.model_validate(settings))

    async def post(self, server: str, path: str, body: Any, cookies: Mapping[str, str]) -> ResourcesReply:
        import aiohttp

        self._ensure_session()
        kwargs: dict[str, Any] = {"cookies": dict(cookies)}
        if self.connection_retries is not None:
            kwargs["_max_connection_retries"] = self.connection_retries
        if body is not None:
            kwargs["json"] = body
        try:
            response = await self.server_client.post(server_name=server, url_path=path, **kwargs)
            raw = await response.read()
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise ResourcesUnavailableError(f"{server}{path}: {type(exc).__name__}: {exc}") from exc
        try:
            data = json.loads(raw) if raw else None
        except ValueError:
            data = raw.decode(errors="replace")
        new = {str(k): str(getattr(v, "value", v)) for k, v in response.cookies.items()}
        return ResourcesReply(response.status, data, {**cookies, **new})


class ResourcesToolExecutor:
    """The agent loop's tools: each call is a POST to the resources server's tool route. The
    server's reply is the `ToolObservation` its `ToolBox` produced."""

    def __init__(
        self,
        client: ResourcesClient,
        server: str,
        cookies: dict[str, str],
        specs: list[dict[str, Any]],
        rollout_id: str | None = None,
    ) -> None:
        self.client, self.server, self.cookies, self._specs = client, server, cookies, specs
        self.rollout_id = rollout_id
        self.names = [s["function"]["name"] for s in specs]

    async def post(self, path: str, body: Any) -> ResourcesReply:
        """POST within this rollout's session (its cookies) and its rollout context."""
        with rollout_context(self.rollout_id):
            return await self.client.post(self.server, path, body, self.cookies)

    def specs(self) -> list[dict[str, Any]]:
        return self._specs

    async def call(self, name: str, arguments: str | Mapping[str, Any] | None) -> ToolObservation:
        if name not in self.names:
            return unknown_tool(name, self.names)
        body = decode_arguments(name, arguments)
        if isinstance(body, ToolObservation):
            return body
        if name in ALL_TOOLS:  # one of ours: the same schema check as in process, before the POST
            try:
                ARGUMENT_MODELS[name].model_validate(body)
            except ValidationError as exc:
                return invalid_arguments(name, exc)
        reply = await self.post(f"/{name}", body)
        self.cookies.update(reply.cookies)
        if reply.status >= 500:
            raise ResourcesUnavailableError(
                f"{self.server}/{name} answered HTTP {reply.status}: {str(reply.body)[:300]}"
            )
        if reply.status >= 400:  # bad arguments: the model sees the complaint and may retry
            return ToolObservation(
                text=f"The tool `{name}` rejected the call (HTTP {reply.status}): {str(reply.body)[:1000]}",
                is_error=True,
            )
        reply_body = reply.body
        if isinstance(reply_body, Mapping) and "text" in reply_body:
            return ToolObservation.model_validate(
                {
                    "text": str(reply_body.get("text") or ""),
                    **{k: v for k, v in reply_body.items() if k != "text"},
                }
            )
        text = reply_body if isinstance(reply_body, str) else json.dumps(reply_body, ensure_ascii=False)
        return ToolObservation(text=text)


class ResourcesCommands:
    """`CommandExecutor` over a resources server's `/exec`: a harness's commands in the
    session's sandbox on that server."""

    def __init__(self, tools: ResourcesToolExecutor) -> None:
        self.tools = tools

    async def exec(self, command: str, *, cwd: str | None, timeout_s: float) -> ExecResult:
        started = time.monotonic()
        reply = await self.tools.post("/exec", {"command": command, "cwd": cwd, "timeout_s": timeout_s})
        self.tools.cookies.update(reply.cookies)
        if reply.status >= 500:
            raise ResourcesUnavailableError(f"{self.tools.server}/exec answered HTTP {reply.status}")
        if reply.status != 200 or not isinstance(reply.body, Mapping):
            return ExecResult(
                exit_code=-1,
                stdout="",
                stderr=f"the command was refused (HTTP {reply.status}): {str(reply.body)[:500]}",
                duration_s=time.monotonic() - started,
            )
        return ExecResult.model_validate(reply.body)


@dataclass
class ResourcesSession:
    """One rollout's session on a resources server: its cookies and whether it is over."""

    tools: ResourcesToolExecutor
    verified: bool = False
    closed: bool = False

    @property
    def commands(self) -> ResourcesCommands:
        return ResourcesCommands(self.tools)


class ResourcesServerTransport:
    """INIT, tools and EVAL through one resources server's routes."""

    # The resources server's session (sandbox, workspace) must live until /verify has collected
    # what it needs (SWE: the diff), so the pipeline releases the state only after EVAL.
    eval_needs_run_state = True

    def __init__(self, server: str, client: ResourcesClient) -> None:
        self.server = server
        self.client = client

    def validate(self, instance: Mapping[str, Any]) -> None:
        """Nothing here: the domain's check lives in the resources server (`check_instance`)."""

    async def check_instance(self, instance: Mapping[str, Any]) -> None:
        """At submit: raise `InvalidInstanceError` naming the field when the resources server's
        `/check_instance` refuses the row (the check `/seed_session` runs; nothing is opened), or
        `ResourcesUnavailableError` when it cannot answer (the door answers 503, Retry-After)."""
        with rollout_context(observability.rollout_id_of(instance)):
            reply = await self.client.post(self.server, "/check_instance", dict(instance), {})
        if reply.status in (404, 405):  # a server without the route: it checks at /seed_session
            return
        if reply.status >= 500:
            raise ResourcesUnavailableError(
                f"{self.server}/check_instance answered HTTP {reply.status}: {str(reply.body)[:300]}"
            )
        if reply.status >= 400:
            raise refusal_of(reply) or InvalidInstanceError(
                "",
                f"{self.server}/check_instance refused the row (HTTP {reply.status}): {str(reply.body)[:500]}",
            )

    async def open(self, job: Job) -> ResourcesSession:
        rollout_id = observability.rollout_id_of(job.instance)
        try:
            with rollout_context(rollout_id):
                reply = await self.client.post(self.server, "/seed_session", job.instance, {})
        except ResourcesUnavailableError as exc:
            raise RolloutFailure("infrastructure", f"seed_session: {exc}") from exc
        if reply.status >= 500:
            raise RolloutFailure(
                "infrastructure",
                f"{self.server}/seed_session answered HTTP {reply.status}: {str(reply.body)[:500]}",
            )
        if reply.status >= 400:
            refused = refusal_of(reply)
            if refused is not None:  # the domain's own check of the row, answered as every door answers it
                raise RolloutFailure("data", str(refused), 400, code=INVALID_INSTANCE)
            raise RolloutFailure(
                "data",
                f"{self.server}/seed_session refused the row (HTTP {reply.status}): {str(reply.body)[:500]}",
            )
        cookies = dict(reply.cookies)
        tools = ResourcesToolExecutor(
            self.client, self.server, cookies, chat_tool_specs(job.instance), rollout_id=rollout_id
        )
        return ResourcesSession(tools=tools)

    async def finish_run(
        self, job: Job, state: ResourcesSession, agent: AgentTrajectory, trajectory: Trajectory, model: str
    ) -> None:
        # Gym's /run answers 503 (retried by NeMo RL) or 422 when no turn ran at all, rather
        # than a masked sample that carries nothing.
        if not agent.tokens.turns:
            failure = agent.tokens.failure
            detail = f"{failure.kind}: {failure.message}" if failure else agent.stop_reason
            if agent.stop_reason == "infrastructure_error":
                raise RolloutFailure("infrastructure", f"inference failed before the first turn: {detail}")
            if agent.stop_reason == "model_error":
                raise RolloutFailure("data", f"the model server refused the first turn: {detail}", 422)
        trajectory.response = gym_response(agent, row=job.instance, model=model)
        trajectory.observations = observability.observe_agent(agent, model=model)

    async def evaluate(self, job: Job, state: ResourcesSession | None, trajectory: Trajectory) -> Evaluation:
        assert state is not None
        body = {**job.instance, "response": trajectory.response}
        try:
            reply = await state.tools.post("/verify", body)
        except ResourcesUnavailableError as exc:
            return masked_evaluation("verifier_error", f"/verify unreachable: {exc}")
        state.verified = True  # the server closes its session in /verify, whatever it answers
        if reply.status != 200 or not isinstance(reply.body, Mapping):
            return masked_evaluation(
                "verifier_error",
                f"{self.server}/verify answered HTTP {reply.status}: {str(reply.body)[:500]}",
            )
        verify = dict(reply.body)
        reward = verify.get("reward")
        if not isinstance(reward, int | float) or isinstance(reward, bool) or reward != reward:
            return masked_evaluation("verifier_error", f"/verify returned a non-numeric reward {reward!r}")
        components = verify.get("reward_components")
        components = (
            {str(k): float(v) for k, v in components.items()}
            if isinstance(components, Mapping) and abs(sum(components.values()) - reward) <= 1e-6
            else {"reward": float(reward)}
        )
        resolved = verify.get("resolved")
        return Evaluation(
            reward=float(reward),
            reward_components=components,
            resolved=resolved if isinstance(resolved, bool) else None,
            report={"verify": verify},
        )

    async def release(self, state: ResourcesSession) -> None:
        if state.verified or state.closed:
            return
        state.closed = True
        with contextlib.suppress(Exception):
            await state.tools.post("/close_session", None)


def refusal_of(reply: ResourcesReply) -> InvalidInstanceError | None:
    """The domain's refusal of a row in a resources server's 400 (`invalid_instance` naming the
    field: `ProRLTaskServer.check_row`); None for any other answer."""
    detail = reply.body.get("detail") if isinstance(reply.body, Mapping) else None
    if reply.status != 400 or not isinstance(detail, Mapping) or detail.get("error") != INVALID_INSTANCE:
        return None
    return InvalidInstanceError(str(detail.get("field") or ""), str(detail.get("reason")))


def masked_evaluation(kind: str, reason: str) -> Evaluation:
    return Evaluation(
        reward=0.0,
        reward_components={"reward": 0.0},
        report={"verify": None, "mask_sample": True, "failure_kind": kind, "failure_reason": reason},
    )
