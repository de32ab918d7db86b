"""The pipeline behind the NeMo Gym agent `responses_api_agents/prorl_agent` (its `/run`).

    /run(row) -> JobSpec(task = row.data_source) -> Pipeline:
      INIT  POST <resources server>/seed_session (row)          cookies kept per rollout
      RUN   agent loop over a TokenSession on the LLM backend pool; tool calls are POSTed to the
            resources server's tool routes (/bash, /ipython, /editor, /submit) with those cookies
      EVAL  POST <resources server>/verify (row + response)      the server then closes its session
      release: POST /close_session when /verify was never reached (cancelled, failed)
    -> the Gym verify response: token fields on every generated item, reward, reward_components,
       instance_config.mask_sample, stage timings as numeric fields

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
prompt over the context, time budget spent) are returned masked (`nemo_rl_result.py`). The
statuses below are for requests no rollout can be made of:
  200  the rollout ran
  400  the row cannot be routed or prompted (unknown data_source, bad input)
  422  the model request itself was refused before any turn (e.g. bad sampling parameters)
  503  infrastructure: no backend, resources server unreachable/5xx at seed, all backends died
       before the first turn, queue full; 504: the rollout ran past its time budget
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, NamedTuple, Protocol

from pydantic import BaseModel, ConfigDict, Field

from nemo_gym_prorl.agent.handler import LLMAccess, to_trajectory
from nemo_gym_prorl.agent.loop import AgentLimits, AgentTrajectory, run_agent
from nemo_gym_prorl.agent.prompts import PromptError, ToolPromptStyle, initial_messages
from nemo_gym_prorl.integrations import gym_observability
from nemo_gym_prorl.integrations.gym_response import chat_tool_specs, gym_response
from nemo_gym_prorl.integrations.nemo_rl_result import ensure_trainable
from nemo_gym_prorl.llm.dialects import make_dialect
from nemo_gym_prorl.llm.pool import LLMBackendPool, PoolConfig
from nemo_gym_prorl.llm.records import SamplingParams
from nemo_gym_prorl.llm.tito import TokenSession
from nemo_gym_prorl.pipeline import (
    Evaluation,
    HandlerRegistry,
    Job,
    JobResult,
    JobSpec,
    JobState,
    Pipeline,
    PipelineConfig,
    QueueFullError,
    Trajectory,
    UnknownTaskError,
)

log = logging.getLogger(__name__)

FailureKind = Literal["infrastructure", "data"]


# -- configuration ----------------------------------------------------------------------------


class ModelAccessConfig(BaseModel):
    """How the agent reaches the policy model."""

    model_config = ConfigDict(extra="forbid")

    source: Literal["auto", "urls", "policy_base_url", "model_server"] = Field(
        "auto",
        description="auto: `urls` if set, else the global `policy_base_url` (NeMo RL's per-rank vLLM "
        "servers), else the Gym model server named by the agent's `model_server`.",
    )
    urls: list[str] = Field(
        default_factory=list, description="OpenAI-compatible servers, with or without /v1"
    )
    dialect: Literal["nemo_rl", "vllm"] | None = Field(
        None,
        description="nemo_rl: /v1/chat/completions with prefix-token splicing (NeMo RL's policy server, "
        "a Gym model server); vllm: token-id prompts to /v1/completions (plain vLLM, token-exact). "
        "Default: vllm for `urls`, nemo_rl otherwise.",
    )
    model: str | None = Field(
        None, description="served model name (default: policy_model_name, or /v1/models)"
    )
    api_key: str | None = None
    max_model_len: int | None = Field(None, ge=1)
    tool_prompt: ToolPromptStyle = Field(
        "system", description="tools in the system prompt, or via the template"
    )
    health_path: str | None = Field("/health", description="None: trust the backends (no probes)")
    request_timeout_s: float = Field(600.0, gt=0)
    max_attempts: int = Field(3, ge=1)


class ProRLAgentSettings(BaseModel):
    """The agent's own settings (everything but Gym's server references)."""

    model_config = ConfigDict(extra="forbid")

    llm: ModelAccessConfig = Field(default_factory=ModelAccessConfig)
    pipeline: PipelineConfig = Field(
        default_factory=lambda: PipelineConfig(active_time_s=3600.0),
        description="INIT/RUN/EVAL pool sizes, queue bounds, the per-rollout active-time budget",
    )
    agent: AgentLimits = Field(default_factory=lambda: AgentLimits(max_turns=16, max_time_s=1800.0))
    sampling: SamplingParams = Field(
        default_factory=SamplingParams, description="defaults; the row's responses_create_params override"
    )
    rollout_timeout_s: float | None = Field(None, gt=0, description="wall limit of one /run (504 after it)")


class ResolvedModelAccess(NamedTuple):
    urls: list[str]
    dialect: str
    model: str | None
    api_key: str | None
    health_path: str | None
    source: str


def _url_list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value] if value.strip() and value.strip() != "???" else []
    return [str(v) for v in value if str(v).strip()]


def resolve_model_access(
    config: ModelAccessConfig, global_config: Mapping[str, Any], model_server: str | None
) -> ResolvedModelAccess:
    """Where the backends are, which dialect speaks to them, and the served model name."""
    source = config.source
    policy_urls = _url_list(global_config.get("policy_base_url"))
    if source == "auto":
        source = "urls" if config.urls else "policy_base_url" if policy_urls else "model_server"
    policy_name = global_config.get("policy_model_name")
    model = config.model or (str(policy_name) if policy_name not in (None, "", "???") else None)
    if source == "urls":
        if not config.urls:
            raise ValueError("llm.source=urls needs llm.urls")
        return ResolvedModelAccess(
            list(config.urls), config.dialect or "vllm", model, config.api_key, config.health_path, source
        )
    if source == "policy_base_url":
        if not policy_urls:
            raise ValueError("llm.source=policy_base_url but the global config has no policy_base_url")
        key = config.api_key or global_config.get("policy_api_key")
        return ResolvedModelAccess(
            policy_urls,
            config.dialect or "nemo_rl",
            model,
            key if key not in ("", "???") else None,
            config.health_path,
            source,
        )
    if model_server is None:
        raise ValueError(
            "no llm.urls, no policy_base_url and no model_server: the agent cannot reach a model"
        )
    server = _server_config(global_config, model_server)
    if server is None or not server.get("host") or not server.get("port"):
        raise ValueError(f"model server {model_server!r} has no host/port in the global config")
    model = model or (str(server["model"]) if server.get("model") else None)
    # A Gym model server has no /health route; it is up when the head server says so.
    return ResolvedModelAccess(
        [f"http://{server['host']}:{server['port']}"], config.dialect or "nemo_rl", model, None, None, source
    )


def _server_config(global_config: Mapping[str, Any], instance: str) -> Mapping[str, Any] | None:
    """The inner config of a server instance (`<instance>.<type>.<impl>`)."""
    entry = global_config.get(instance)
    if not isinstance(entry, Mapping):
        return None
    for group in entry.values():
        if isinstance(group, Mapping):
            for impl in group.values():
                if isinstance(impl, Mapping):
                    return impl
    return None


# -- talking to resources servers -------------------------------------------------------------


class ResourcesReply(NamedTuple):
    status: int
    body: Any
    cookies: dict[str, str]


class ResourcesUnavailableError(RuntimeError):
    """The resources server could not be reached (connection refused, reset, timeout)."""


class ResourcesTransport(Protocol):
    """POST to a resources server by instance name, with per-rollout cookies."""

    async def post(self, server: str, path: str, body: Any, cookies: Mapping[str, str]) -> ResourcesReply: ...


class ServerClientTransport:
    """The transport over NeMo Gym's `ServerClient` (aiohttp, names resolved from the global config)."""

    def __init__(self, server_client: Any) -> None:
        self.server_client = server_client

    async def post(self, server: str, path: str, body: Any, cookies: Mapping[str, str]) -> ResourcesReply:
        import aiohttp

        kwargs: dict[str, Any] = {"cookies": dict(cookies)}
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


@dataclass
class ToolResult:
    text: str
    is_error: bool


class HTTPToolExecutor:
    """The agent loop's tools: each call is a POST to the resources server's tool route."""

    def __init__(
        self, transport: ResourcesTransport, server: str, cookies: dict[str, str], specs: list[dict[str, Any]]
    ) -> None:
        self.transport, self.server, self.cookies, self._specs = transport, server, cookies, specs
        self.names = {s["function"]["name"] for s in specs}

    def specs(self) -> list[dict[str, Any]]:
        return self._specs

    async def call(self, name: str, arguments: str | Mapping[str, Any] | None) -> ToolResult:
        if name not in self.names:
            return ToolResult(
                f"Error: unknown tool {name!r}; available: {', '.join(sorted(self.names))}", True
            )
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments or "{}")
            except ValueError as exc:
                return ToolResult(f"Error: tool arguments are not JSON: {exc}", True)
        reply = await self.transport.post(self.server, f"/{name}", dict(arguments or {}), self.cookies)
        self.cookies.update(reply.cookies)
        if reply.status >= 500:
            raise ResourcesUnavailableError(
                f"{self.server}/{name} answered HTTP {reply.status}: {str(reply.body)[:300]}"
            )
        if reply.status >= 400:  # bad arguments: the model sees the complaint and may retry
            return ToolResult(
                f"Error: the tool rejected the call (HTTP {reply.status}): {str(reply.body)[:1000]}", True
            )
        body = reply.body
        if isinstance(body, Mapping) and "text" in body:
            return ToolResult(str(body.get("text") or ""), bool(body.get("is_error")))
        return ToolResult(body if isinstance(body, str) else json.dumps(body, ensure_ascii=False), False)


# -- the rollout handler ----------------------------------------------------------------------


class RolloutFailure(Exception):
    """A rollout that cannot produce a result; `kind` decides the HTTP status of /run."""

    def __init__(self, kind: FailureKind, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.kind: FailureKind = kind
        self.status = status or (503 if kind == "infrastructure" else 400)


@dataclass
class GymRolloutState:
    cookies: dict[str, str] = field(default_factory=dict)
    verified: bool = False
    closed: bool = False


class GymRolloutHandler:
    """A pipeline `RolloutHandler` whose stages are a Gym resources server's routes."""

    # The resources server's session (sandbox, workspace) must live until /verify has collected
    # what it needs (SWE: the diff), so the pipeline releases the state only after EVAL.
    eval_needs_run_state = True

    def __init__(
        self,
        server: str,
        transport: ResourcesTransport,
        llm: LLMAccess,
        limits: AgentLimits,
        failures: dict[str, RolloutFailure],
    ) -> None:
        self.server = server
        self.transport = transport
        self.llm = llm
        self.limits = limits
        self.failures = failures  # job id -> why it failed, read by /run to pick the status

    def _fail(self, job: Job, kind: FailureKind, message: str, status: int | None = None) -> RolloutFailure:
        failure = RolloutFailure(kind, message, status)
        self.failures[job.id] = failure
        return failure

    async def init(self, job: Job) -> GymRolloutState:
        try:
            reply = await self.transport.post(self.server, "/seed_session", job.instance, {})
        except ResourcesUnavailableError as exc:
            raise self._fail(job, "infrastructure", f"seed_session: {exc}") from exc
        if reply.status >= 500:
            raise self._fail(
                job,
                "infrastructure",
                f"{self.server}/seed_session answered HTTP {reply.status}: {str(reply.body)[:500]}",
            )
        if reply.status >= 400:
            raise self._fail(
                job,
                "data",
                f"{self.server}/seed_session refused the row (HTTP {reply.status}): {str(reply.body)[:500]}",
            )
        return GymRolloutState(cookies=dict(reply.cookies))

    async def run(self, job: Job, state: GymRolloutState) -> Trajectory:
        row = job.instance
        specs = chat_tool_specs(row)
        style = self.llm.tool_prompt
        try:
            messages = initial_messages(row, specs, style=style)
        except PromptError as exc:
            raise self._fail(job, "data", f"cannot build the prompt: {exc}") from exc
        model = await self.llm.model_name()
        session = TokenSession(
            self.llm.pool,
            self.llm.dialect,
            model=model,
            sampling=self.llm.sampling_for(job),
            tools=specs if style == "template" and specs else None,
            trajectory_id=job.id,
            max_model_len=self.llm.max_model_len,
        )
        tools = HTTPToolExecutor(self.transport, self.server, state.cookies, specs)
        try:
            agent = await run_agent(session, tools, messages, self.limits)
        except ResourcesUnavailableError as exc:
            raise self._fail(job, "infrastructure", f"tool call failed: {exc}") from exc
        finally:
            session.close()
        if not agent.tokens.turns:
            failure = agent.tokens.failure
            detail = f"{failure.kind}: {failure.message}" if failure else agent.stop_reason
            if agent.stop_reason == "infrastructure_error":
                raise self._fail(job, "infrastructure", f"inference failed before the first turn: {detail}")
            if agent.stop_reason == "model_error":
                raise self._fail(job, "data", f"the model server refused the first turn: {detail}", 422)
        return self._trajectory(agent, specs, row, model)

    @staticmethod
    def _trajectory(
        agent: AgentTrajectory, specs: list[dict[str, Any]], row: Mapping[str, Any], model: str
    ) -> Trajectory:
        trajectory = to_trajectory(agent, specs, {})
        extra = trajectory.model_extra or {}
        extra["gym_response"] = gym_response(agent, row=row, model=model)
        extra["tool_errors"] = sum(1 for s in agent.steps if s.is_error)
        extra["http_retries"] = agent.tokens.http_retries
        extra[gym_observability.EXTRA_KEY] = gym_observability.observe_agent(agent, model=model)
        return trajectory

    async def evaluate(self, job: Job, state: GymRolloutState | None, trajectory: Trajectory) -> Evaluation:
        assert state is not None
        extra = trajectory.model_extra or {}
        body = {**job.instance, "response": extra["gym_response"]}
        try:
            reply = await self.transport.post(self.server, "/verify", body, state.cookies)
        except ResourcesUnavailableError as exc:
            return _masked_evaluation("verifier_error", f"/verify unreachable: {exc}")
        state.verified = True  # the server closes its session in /verify, whatever it answers
        if reply.status != 200 or not isinstance(reply.body, Mapping):
            return _masked_evaluation(
                "verifier_error",
                f"{self.server}/verify answered HTTP {reply.status}: {str(reply.body)[:500]}",
            )
        verify = dict(reply.body)
        reward = verify.get("reward")
        if not isinstance(reward, int | float) or isinstance(reward, bool) or reward != reward:
            return _masked_evaluation("verifier_error", f"/verify returned a non-numeric reward {reward!r}")
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

    async def release(self, state: GymRolloutState) -> None:
        if state.verified or state.closed:
            return
        state.closed = True
        with contextlib.suppress(Exception):
            await self.transport.post(self.server, "/close_session", None, state.cookies)


def _masked_evaluation(kind: str, reason: str) -> Evaluation:
    return Evaluation(
        reward=0.0,
        reward_components={"reward": 0.0},
        report={"verify": None, "mask_sample": True, "failure_kind": kind, "failure_reason": reason},
    )


# -- the /run result --------------------------------------------------------------------------


def sampling_from_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """NeMo RL stamps temperature/top_p/max_output_tokens on responses_create_params."""
    params = row.get("responses_create_params") or {}
    out: dict[str, Any] = {}
    for src, dst in (("temperature", "temperature"), ("top_p", "top_p"), ("max_output_tokens", "max_tokens")):
        if params.get(src) is not None:
            out[dst] = params[src]
    return out


def run_result(row: Mapping[str, Any], result: JobResult) -> dict[str, Any]:
    """The Gym verify response `/run` returns for a finished job."""
    trajectory = result.trajectory
    assert trajectory is not None
    extra = trajectory.model_extra or {}
    report = result.report
    verify: dict[str, Any] = dict(report.get("verify") or {})
    body: dict[str, Any] = {k: v for k, v in row.items() if k not in verify}
    body.update(verify)
    body["responses_create_params"] = row.get("responses_create_params")
    body["response"] = extra["gym_response"]
    reward = float(result.reward or 0.0)
    inference_failed = bool(extra.get("infrastructure_failed"))
    masked = bool(verify.get("mask_sample")) or bool(report.get("mask_sample")) or inference_failed
    body["reward"] = reward
    body["reward_components"] = dict(result.reward_components) or {"reward": reward}
    body["mask_sample"] = masked
    instance_config = (
        verify.get("instance_config") if isinstance(verify.get("instance_config"), Mapping) else {}
    )
    body["instance_config"] = {**instance_config, "mask_sample": masked}
    if masked and not body.get("failure_kind"):
        if inference_failed:
            failure = extra.get("failure") or {}
            body["failure_kind"] = "provider_unavailable"
            body["failure_reason"] = (
                f"inference failed mid-trajectory: {failure.get('kind')}: {failure.get('message')}"
            )
        else:
            body["failure_kind"] = report.get("failure_kind") or "verifier_error"
            body["failure_reason"] = report.get("failure_reason")
    timing = result.timing
    steps = extra.get("steps") or []
    # Numeric top-level fields: NeMo RL logs them as metrics.
    body.update(
        init_time_s=timing.init_time,
        run_time_s=timing.run_time,
        eval_time_s=timing.eval_time,
        queue_wait_s=timing.init_wait + timing.run_wait + timing.eval_wait,
        total_time_s=timing.total_elapsed,
        num_turns=int(extra.get("num_turns") or 0),
        generated_tokens=int(extra.get("generated_tokens") or 0),
        num_tool_calls=len(steps),
        tool_errors=int(extra.get("tool_errors") or 0),
        end_properly=float(bool(trajectory.end_properly)),
    )
    body["prorl"] = {
        "job_id": result.id,
        "task": result.task,
        "stop_reason": trajectory.stop_reason,
        "reroutes": extra.get("reroutes") or [],
        "http_retries": extra.get("http_retries", 0),
    }
    # NeMo RL cannot consume a result without a generated turn (first prompt overflowed, time ran out).
    return ensure_trainable(body, trajectory_id=result.id, reason=str(trajectory.stop_reason))


class RunOutcome(NamedTuple):
    status: int
    body: dict[str, Any]


def _error(status: int, kind: str, message: str) -> RunOutcome:
    return RunOutcome(status, {"error": kind, "detail": message})


class ProRLGymRuntime:
    """Everything behind the agent: LLM pool, handlers per resources server, pipeline, service.

    `start()` must run inside the serving event loop (the pool's HTTP client binds to it).
    """

    def __init__(
        self,
        settings: ProRLAgentSettings,
        resources: Mapping[str, str],
        transport: ResourcesTransport,
        model_access: ResolvedModelAccess,
        *,
        default_task: str | None = None,
        model_call_capture_dir: Path | None = None,
    ) -> None:
        if not resources:
            raise ValueError("the agent needs at least one resources server")
        self.settings = settings
        self.resources = dict(resources)
        self.transport = transport
        self.model_access = model_access
        self.default_task = default_task or (next(iter(self.resources)) if len(self.resources) == 1 else None)
        self.failures: dict[str, RolloutFailure] = {}
        self.model_call_capture_dir = model_call_capture_dir  # Gym's, when observability is on
        # Built here, started in `start()` (inside the serving loop): the HTTP faces need the
        # service object when their routes are declared.
        from nemo_gym_prorl.service.backends import PoolBackendRegistry
        from nemo_gym_prorl.service.core import RolloutService, ServiceOptions

        cfg = settings.llm
        self.pool = LLMBackendPool(
            PoolConfig(
                backends=model_access.urls,
                health_path=model_access.health_path,
                api_key=model_access.api_key,
                request_timeout_s=cfg.request_timeout_s,
                max_attempts=cfg.max_attempts,
            )
        )
        self.llm = LLMAccess(
            pool=self.pool,
            dialect=make_dialect(model_access.dialect),
            model=model_access.model,
            default_sampling=settings.sampling,
            max_model_len=cfg.max_model_len,
            tool_prompt=cfg.tool_prompt,
        )
        registry = HandlerRegistry()
        for task, server in self.resources.items():
            handler = GymRolloutHandler(server, transport, self.llm, settings.agent, self.failures)
            registry.register(
                task, handler, aliases=[server] if server != task and server not in self.resources else []
            )
        self.pipeline = Pipeline(registry, settings.pipeline)
        self.service = RolloutService(
            self.pipeline, PoolBackendRegistry(self.pool), ServiceOptions(require_backend=True)
        )
        self._lock = asyncio.Lock()
        self._started = False
        self._closed = False

    async def start(self) -> None:
        async with self._lock:
            if self._started:
                return
            await self.pool.start()
            await self.service.start()
            self._started = True
            access = self.model_access
            log.info(
                "prorl_agent: %d backend(s) via %s (%s dialect), tasks %s",
                len(access.urls), access.source, access.dialect, self.pipeline.handlers.names(),
            )  # fmt: skip

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
        from nemo_gym_prorl.service.errors import ApiError

        await self.start()
        try:
            spec = self.job_spec(row)
            self.pipeline.handlers.canonical(spec.task)
        except UnknownTaskError as exc:
            return _error(400, "unknown_task", str(exc))
        except ValueError as exc:
            return _error(400, "bad_row", str(exc))
        started = time.monotonic()
        try:
            result = await self.service.process(spec, self.settings.rollout_timeout_s)
        except ApiError as exc:
            status = exc.status if exc.status >= 500 else 503
            return _error(status, getattr(exc, "code", "unavailable"), str(exc))
        except QueueFullError as exc:
            return _error(503, "queue_full", str(exc))
        finally:
            failure = self.failures.pop(spec.id, None)
        if result.state is JobState.DONE:
            body = run_result(row, result)
            return RunOutcome(
                200, await gym_observability.publish(row, result, body, self.model_call_capture_dir)
            )
        if failure is not None:
            return _error(failure.status, f"{failure.kind}_failure", str(failure))
        if result.critical_error == "timeout":
            return _error(
                504,
                "timeout",
                result.error or f"rollout exceeded its budget after {time.monotonic() - started:.1f}s",
            )
        if result.state is JobState.CANCELLED:
            return _error(503, "cancelled", result.cancel_reason or "cancelled")
        return _error(500, f"{result.critical_error or 'unknown'}_error", result.error or "rollout failed")
