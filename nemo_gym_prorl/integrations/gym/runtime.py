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
  400  the row cannot be routed or run (unknown data_source; an instance the task cannot run,
       e.g. no `responses_create_params`, named in the answer)
  422  the model request itself was refused before any turn (e.g. bad sampling parameters)
  503  infrastructure: no backend, resources server unreachable/5xx at seed, all backends died
       before the first turn, queue full (with `Retry-After`, as on every door of the stack);
  504  the rollout ran past its time budget
The statuses come from the stack's one table (`service.errors`), as the rollout API's do.

The stack itself (pool, pipeline, executor, service) is `service.stack.build_stack`, the one
`prorl serve` builds; this module adds only the Gym handlers and `/run`.
"""

from __future__ import annotations

import functools
import ipaddress
import logging
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from nemo_gym.episode_types import EpisodeId
from nemo_gym.global_config import ROLLOUT_ID_KEY_NAME

from nemo_gym_prorl.agent.handler import AgentRolloutHandler
from nemo_gym_prorl.agent.harness import make_harness
from nemo_gym_prorl.integrations.gym import observability
from nemo_gym_prorl.integrations.gym.config import ProRLAgentSettings, ResolvedModelAccess
from nemo_gym_prorl.integrations.gym.episodes import (
    EpisodeLedger,
    EpisodeOutcome,
    episode_result,
    failure_for_error,
    failure_for_result,
    task_digest,
)
from nemo_gym_prorl.integrations.gym.result import RunOutcome, error_outcome, run_result, sampling_from_row
from nemo_gym_prorl.integrations.gym.transport import ResourcesClient, ResourcesServerTransport
from nemo_gym_prorl.llm.access import LLMAccess
from nemo_gym_prorl.pipeline import Budget, HandlerRegistry, JobSpec, JobState
from nemo_gym_prorl.service.backends import BackendRegistry
from nemo_gym_prorl.service.core import ServiceOptions
from nemo_gym_prorl.service.errors import as_api_error, result_error
from nemo_gym_prorl.service.stack import RolloutStack, StackConfig, build_stack

log = logging.getLogger(__name__)


ResourcesClientFactory = Callable[[], ResourcesClient]
"""Builds the client to the resources servers where the stages run: picklable (a functools.partial
of `GymServerClient.from_config`) when they run on Ray nodes."""


@dataclass(frozen=True)
class GymHandlers:
    """The stack's handlers factory for the Gym agent: one rollout handler per resources
    server, the same handler `prorl serve` runs, over the server's HTTP routes. Plain data and
    picklable, so that every Ray node builds its own (with its own client) from it."""

    settings: ProRLAgentSettings
    resources: dict[str, str]
    clients: ResourcesClientFactory
    default_task: str | None = None
    origin_ip: str | None = None  # the agent's node: loopback addresses are only valid there

    def __call__(self, llm: LLMAccess, backends: BackendRegistry) -> HandlerRegistry:
        client = self.clients()
        self._check_reachable(client, llm)
        registry = HandlerRegistry(default=self.default_task)
        harness = self.settings.harness
        for task, server in self.resources.items():
            transport = ResourcesServerTransport(server, client)
            handler = AgentRolloutHandler(
                transport, llm, limits=self.settings.agent, harness=make_harness(harness) if harness else None
            )
            aliases = [server] if server != task and server not in self.resources else []
            registry.register(task, handler, aliases=aliases)
        return registry

    def _check_reachable(self, client: ResourcesClient, llm: LLMAccess) -> None:
        """On a Ray node other than the agent's, a loopback address of the agent's node means
        nothing: refuse to build rather than fail every rollout."""
        if self.origin_ip is None:
            return
        import ray

        if not ray.is_initialized():  # the agent's own process, before the executor starts
            return
        here = ray.util.get_node_ip_address()
        if here == self.origin_ip:
            return
        urls = {server: client.base_url(server) for server in self.resources.values()}
        urls.update({url: url for url in llm.pool.backends()})
        unreachable = [name for name, url in urls.items() if url is not None and is_loopback_url(url)]
        if unreachable:
            raise RuntimeError(
                f"node {here} cannot reach {', '.join(unreachable)} at a loopback address of "
                f"{self.origin_ip}: serve them on a routable host (Gym: default_host=0.0.0.0), or keep "
                "the rollout actors on that node (executor.ray.node_labels / resource)"
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
    """The Gym agent's rollout stack (`build_stack`, as `prorl serve` builds it, over
    `GymHandlers`) and its `/run`.

    Stages run in this process or, with `executor.kind=ray`, on a rollout actor on every node of
    the Ray cluster (each with its own client to the resources servers and its share of the LLM
    backends' caps). `start()` must run inside the serving event loop.
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
        self.model_access = model_access
        self.model_call_capture_dir = model_call_capture_dir  # Gym's, when observability is on
        default = default_task or (next(iter(self.resources)) if len(self.resources) == 1 else None)
        handlers = GymHandlers(
            settings, self.resources, clients, default_task=default, origin_ip=_origin_ip(settings)
        )
        config = StackConfig(
            llm=model_access.settings,
            pipeline=settings.pipeline,
            executor=settings.executor,
            service=ServiceOptions(require_backend=True),
        )
        # Built here, started in `start()` (inside the serving loop): the rollout API's routes
        # need the service when they are declared.
        self.stack: RolloutStack = build_stack(config, handlers, gym_head_address=gym_head_address)
        self.llm = self.stack.llm
        self.pipeline = self.stack.pipeline
        self.service = self.stack.service
        self.episodes = EpisodeLedger()
        # (rollout_id, task digest) -> the job running that episode now: the ledger's key, since
        # Gym's rollout ids repeat across tasks and collection runs.
        self._episode_jobs: dict[tuple[str, str], str] = {}

    async def start(self) -> None:
        if self.stack.started:
            return
        await self.stack.start()
        access = self.model_access
        log.info(
            "prorl_agent: %d backend(s) via %s (%s dialect), tasks %s, stages %s",
            len(access.settings.backends), access.source, access.settings.dialect,
            self.pipeline.handlers.names(), self.settings.executor.kind,
        )  # fmt: skip

    async def close(self) -> None:
        if self.stack.started:
            await self.stack.close()  # stops the pipeline (releasing every rollout), closes the pool

    def job_spec(self, row: Mapping[str, Any], budget: Budget | None = None) -> JobSpec:
        """The job of one `/run` row; its task is resolved by the stack (`data_source`, else the
        default resources server)."""
        group = row.get("_ng_task_index", row.get("_rowidx", row.get("task_id")))
        return JobSpec(
            id=f"gym-{uuid.uuid4().hex}",
            instance=dict(row),
            sampling_params=sampling_from_row(row),
            group_id=str(group) if group is not None else None,
            metadata={
                k: row[k] for k in ("_ng_rollout_id", "_rowidx", "_ng_task_index", "task_id") if k in row
            },
            budget=budget or Budget(),
        )

    async def run(self, row: Mapping[str, Any]) -> RunOutcome:
        """One Gym `/run`: the status code and body to answer."""
        await self.start()
        try:
            spec = self.job_spec(row)
        except ValueError as exc:
            return error_outcome(400, "bad_row", str(exc))
        try:
            result = await self.service.process(spec, self.settings.rollout_timeout_s)
        except Exception as exc:
            refused = as_api_error(exc)
            if refused is None:
                raise
            return error_outcome(refused.status, refused.code, refused.reason, refused.headers)
        failed = result_error(result)
        if failed is not None:
            return error_outcome(failed.status, failed.code, failed.reason, failed.headers)
        body = run_result(row, result)
        return RunOutcome(200, await observability.publish(row, result, body, self.model_call_capture_dir))

    # -- Gym 0.7 episodes (the environment server's door) -----------------------------------------
    async def run_episode(
        self,
        episode: EpisodeId,
        row: Mapping[str, Any],
        wall_time_s: float | None = None,
        *,
        materialized: bool = True,
        collection_run: str | None = None,
    ) -> EpisodeOutcome:
        """One episode of Gym's environment server: a result or a typed failure, never an HTTP
        error. Attempts of one `rollout_id` share one rollout (`EpisodeLedger`), and so do a
        named collection run's resumes (`collection_run`). `wall_time_s` becomes the job's wall
        deadline, so the pipeline ends a late rollout itself (releasing its sandbox) and answers
        `agent_timeout` before Gym's own episode deadline.

        A materialized episode's result leaves out what collection records itself (its
        observations go as the `ng_agent_observations` bundle); a flat row's is `/run`'s body."""
        await self.start()
        # The row's own digest (in its run), as the environment server's cancel names it.
        digest = task_digest(row, collection_run)
        row = {**row, ROLLOUT_ID_KEY_NAME: episode.capture_key}
        run = functools.partial(self._run_episode, episode, digest, row, wall_time_s, materialized)
        return await self.episodes.run(episode, digest, run, named_run=collection_run is not None)

    async def _run_episode(
        self,
        episode: EpisodeId,
        digest: str,
        row: dict[str, Any],
        wall_time_s: float | None,
        materialized: bool,
    ) -> EpisodeOutcome:
        limits = [t for t in (wall_time_s, self.settings.rollout_timeout_s) if t is not None]
        spec = self.job_spec(row, Budget(wall_time_s=min(limits) if limits else None))
        key = (episode.rollout_id, digest)
        self._episode_jobs[key] = str(spec.id)
        try:
            result = await self.service.process(spec, None)
        except Exception as exc:
            refused = as_api_error(exc)
            if refused is None:
                raise
            failure = failure_for_error(refused.status, refused.code, refused.reason)
            return EpisodeOutcome(failure=failure, attempt=episode.attempt)
        finally:
            self._episode_jobs.pop(key, None)
        body = run_result(row, result) if result.state is JobState.DONE else None
        failure = failure_for_result(result, body)
        if failure is not None or body is None:
            assert failure is not None  # a job that is not done always fails
            return EpisodeOutcome(failure=failure, job_id=result.id, attempt=episode.attempt)
        body = await observability.publish(row, result, body, self.model_call_capture_dir)
        if materialized:
            body = episode_result(body, result)
        return EpisodeOutcome(result=body, job_id=result.id, attempt=episode.attempt)

    async def cancel_episode(self, episode: EpisodeId, digest: str, reason: str) -> bool:
        """Stop the rollout of the episode (`rollout_id` and task digest) if it still runs: its
        sandbox and resources session are released by the pipeline before this returns. False,
        and nothing stopped, when the episode has settled or never ran, or when another attempt
        of it waits on the same rollout."""
        job_id = self._episode_jobs.get((episode.rollout_id, digest))
        if job_id is None or self.episodes.shared_with_another_attempt(episode, digest):
            return False
        await self.pipeline.cancel(job_id, reason=reason)
        return True


def _origin_ip(settings: ProRLAgentSettings) -> str | None:
    """This node's address, which Ray nodes compare with their own (only with Ray stages)."""
    if settings.executor.kind != "ray":
        return None
    import ray

    return str(ray.util.get_node_ip_address())
