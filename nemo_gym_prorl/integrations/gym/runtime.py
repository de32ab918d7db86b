# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Everything behind the NeMo Gym agent (`responses_api_agents/prorl_agent`, its `/run`).

    /run(row) -> JobSpec(task = row.data_source) -> Pipeline (the service's own handler, over a
    resources server: `transport.ResourcesServerTransport`) -> the Gym verify response

One agent instance serves several resources servers, chosen per row by `data_source` (the
`resources_servers` map of the agent's config). The model is reached directly, never through a
Gym model server when it can be avoided: NeMo RL's `policy_base_url` list (one URL per DP rank)
goes straight into the backend pool (least in flight, sticky per trajectory) with the `nemo_rl`
dialect; plain vLLM URLs use the `vllm` dialect (token-id prompts); or, as a fallback, the Gym
model server named by `model_server` (its `/v1/chat/completions`, `nemo_rl` dialect).

HTTP status of `/run`. NeMo RL's synchronous GRPO path aborts training on ANY non-200 (and on a
200 without a generated turn); only its single-controller path retries (5xx and 408/429 as
infrastructure, other 4xx as data failures, both within budgets). So every rollout that ran
answers 200: a partial trajectory whose inference died and one with no generated turn (first
prompt over the context, time budget spent) are returned masked (`integrations/nemo_rl/result.py`). The
statuses below are for requests no rollout can be made of:
  200  the rollout ran
  400  the row cannot be routed or prompted (unknown data_source, bad input)
  422  the model request itself was refused before any turn (e.g. bad sampling parameters)
  503  infrastructure: no backend, resources server unreachable/5xx at seed, all backends died
       before the first turn, queue full; 504: the rollout ran past its time budget
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import logging
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from nemo_gym_prorl.agent.handler import AgentRolloutHandler
from nemo_gym_prorl.integrations.gym import observability
from nemo_gym_prorl.integrations.gym.config import ProRLAgentSettings, ResolvedModelAccess
from nemo_gym_prorl.integrations.gym.result import RunOutcome, error_outcome, run_result, sampling_from_row
from nemo_gym_prorl.integrations.gym.transport import ResourcesClient, ResourcesServerTransport
from nemo_gym_prorl.llm.access import LLMAccess, LLMConfig
from nemo_gym_prorl.pipeline import HandlerRegistry, JobSpec, JobState, QueueFullError, UnknownTaskError
from nemo_gym_prorl.pipeline.ray_executor import NodeBuilder, NodeRuntime, NodeShare, make_executor
from nemo_gym_prorl.service.cluster import node_runtime
from nemo_gym_prorl.service.core import ServiceOptions
from nemo_gym_prorl.service.errors import ApiError
from nemo_gym_prorl.service.wiring import build_rollout_stack

log = logging.getLogger(__name__)


ResourcesClientFactory = Callable[[], ResourcesClient]
"""Builds the client to the resources servers where the stages run: picklable (a functools.partial
of `GymServerClient.from_config`) when they run on Ray nodes."""


def gym_handlers(
    settings: ProRLAgentSettings, resources: Mapping[str, str], client: ResourcesClient, llm: LLMAccess
) -> HandlerRegistry:
    """One rollout handler per resources server: the same handler `prorl serve` runs, over the
    resources server's HTTP routes."""
    registry = HandlerRegistry()
    for task, server in resources.items():
        handler = AgentRolloutHandler(ResourcesServerTransport(server, client), llm, limits=settings.agent)
        aliases = [server] if server != task and server not in resources else []
        registry.register(task, handler, aliases=aliases)
    return registry


async def build_gym_node(
    settings_data: dict[str, Any],
    resources: dict[str, str],
    llm_data: dict[str, Any],
    clients: ResourcesClientFactory,
    origin_ip: str,
    share: NodeShare,
) -> NodeRuntime:
    """Runs on a Ray node's rollout actor: the agent's handlers, over this node's LLM pool share
    and its own client to the resources servers (from plain config data)."""
    import ray

    settings = ProRLAgentSettings.model_validate(settings_data)
    llm_config = LLMConfig.model_validate(llm_data)
    client = clients()
    here = ray.util.get_node_ip_address()
    if here != origin_ip:  # a loopback address of the agent's node means nothing here
        urls = {server: client.base_url(server) for server in resources.values()}
        urls.update({url: url for url in llm_config.backends})
        unreachable = [name for name, url in urls.items() if url is not None and is_loopback_url(url)]
        if unreachable:
            raise RuntimeError(
                f"node {here} cannot reach {', '.join(unreachable)} at a loopback address of "
                f"{origin_ip}: serve them on a routable host (Gym: default_host=0.0.0.0), or keep "
                "the rollout actors on that node (executor.ray.node_labels / resource)"
            )
    return await node_runtime(
        llm_config, share, lambda llm, _: gym_handlers(settings, resources, client, llm)
    )


def is_loopback_url(url: str) -> bool:
    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class ProRLGymRuntime:
    """Everything behind the agent: LLM pool, handlers per resources server, pipeline, service.

    Stages run in this process or, with `executor.kind=ray`, on a rollout actor on every node of
    the Ray cluster (each with its own client to the resources servers and its share of the LLM
    backends' caps). `start()` must run inside the serving event loop (the pool's HTTP client
    binds to it).
    """

    def __init__(
        self,
        settings: ProRLAgentSettings,
        resources: Mapping[str, str],
        clients: ResourcesClientFactory,
        model_access: ResolvedModelAccess,
        *,
        default_task: str | None = None,
        model_call_capture_dir: Path | None = None,
        gym_head_address: str | None = None,
    ) -> None:
        if not resources:
            raise ValueError("the agent needs at least one resources server")
        self.settings = settings
        self.resources = dict(resources)
        self.clients = clients
        self.model_access = model_access
        self.default_task = default_task or (next(iter(self.resources)) if len(self.resources) == 1 else None)
        self.model_call_capture_dir = model_call_capture_dir  # Gym's, when observability is on
        self.gym_head_address = gym_head_address
        # Built here, started in `start()` (inside the serving loop): the HTTP faces need the
        # service object when their routes are declared.
        client = clients()
        self.stack = build_rollout_stack(
            model_access.settings,
            settings.pipeline,
            ServiceOptions(require_backend=True),
            lambda llm, _: gym_handlers(settings, self.resources, client, llm),
        )
        self.pool = self.stack.llm.pool
        self.llm = self.stack.llm
        self.pipeline = self.stack.pipeline
        self.service = self.stack.service
        self._lock = asyncio.Lock()
        self._started = False
        self._closed = False

    async def start(self) -> None:
        async with self._lock:
            if self._started:
                return
            executor = await make_executor(
                self.settings.executor, self._node_builder(), gym_head_address=self.gym_head_address
            )
            self.stack.place_on(executor)
            try:
                await self.stack.start()
            except BaseException:
                await executor.close()
                raise
            self._started = True
            access = self.model_access
            log.info(
                "prorl_agent: %d backend(s) via %s (%s dialect), tasks %s, stages %s",
                len(access.settings.backends), access.source, access.settings.dialect,
                self.pipeline.handlers.names(), self.settings.executor.kind,
            )  # fmt: skip

    def _node_builder(self) -> NodeBuilder | None:
        """What each Ray node's actor runs to build its handlers (none in process)."""
        if self.settings.executor.kind != "ray":
            return None
        import ray

        return functools.partial(
            build_gym_node,
            self.settings.model_dump(mode="json"),
            self.resources,
            self.model_access.settings.model_dump(mode="json"),
            self.clients,
            ray.util.get_node_ip_address(),
        )

    async def close(self) -> None:
        if self._closed or not self._started:
            return
        self._closed = True
        await self.service.close()  # stops the pipeline (releasing every rollout), closes the pool

    def job_spec(self, row: Mapping[str, Any]) -> JobSpec:
        task = row.get("data_source") or self.default_task
        group = row.get("_ng_task_index", row.get("_rowidx", row.get("task_id")))
        return JobSpec(
            id=f"gym-{uuid.uuid4().hex}",
            task=str(task) if task is not None else None,
            instance=dict(row),
            sampling_params=sampling_from_row(row),
            group_id=str(group) if group is not None else None,
            metadata={
                k: row[k] for k in ("_ng_rollout_id", "_rowidx", "_ng_task_index", "task_id") if k in row
            },
        )

    async def run(self, row: Mapping[str, Any]) -> RunOutcome:
        """One Gym `/run`: the status code and body to answer."""
        await self.start()
        try:
            spec = self.job_spec(row)
            self.pipeline.handlers.canonical(spec.task)
        except UnknownTaskError as exc:
            return error_outcome(400, "unknown_task", str(exc))
        except ValueError as exc:
            return error_outcome(400, "bad_row", str(exc))
        started = time.monotonic()
        try:
            result = await self.service.process(spec, self.settings.rollout_timeout_s)
        except ApiError as exc:
            status = exc.status if exc.status >= 500 else 503
            return error_outcome(status, getattr(exc, "code", "unavailable"), str(exc))
        except QueueFullError as exc:
            return error_outcome(503, "queue_full", str(exc))
        if result.state is JobState.DONE:
            body = run_result(row, result)
            return RunOutcome(
                200, await observability.publish(row, result, body, self.model_call_capture_dir)
            )
        if result.failure is not None:
            failure = result.failure
            return error_outcome(failure.status, f"{failure.kind}_failure", failure.message)
        if result.critical_error == "timeout":
            return error_outcome(
                504,
                "timeout",
                result.error or f"rollout exceeded its budget after {time.monotonic() - started:.1f}s",
            )
        if result.state is JobState.CANCELLED:
            return error_outcome(503, "cancelled", result.cancel_reason or "cancelled")
        return error_outcome(
            500, f"{result.critical_error or 'unknown'}_error", result.error or "rollout failed"
        )
