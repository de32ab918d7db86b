# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The one rollout handler: INIT -> RUN -> EVAL for every task domain, whatever serves the tools.

    INIT  the transport opens the rollout's tools (a sandbox of our own, or a resources-server
          session over HTTP)
    RUN   a token-exact session on the backend pool; the agent loop over the transport's tools;
          the transport then collects what EVAL needs
    EVAL  the transport scores the trajectory (the domain's evaluator, or the server's /verify)

`RolloutTransport` is the only thing that differs between `prorl serve` (`InProcessTransport`,
below) and the NeMo Gym agent (`integrations.gym.transport.ResourcesServerTransport`): the
prompt, the token session, the agent loop, the tool-error vocabulary (`tools.dispatch`) and the
trajectory are the same code on both paths. The handler owns nothing between stages but the
state its transport returns from `open`, which the pipeline releases exactly once. The LLM pool
is shared by all rollouts and outlives them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from nemo_gym_prorl.agent.answer_formats import answer_pattern, submit_pattern
from nemo_gym_prorl.agent.harness.base import CommandExecutor, SandboxExecutor
from nemo_gym_prorl.agent.harness.runner import HarnessRunner
from nemo_gym_prorl.agent.loop import FINISH_TOOL, AgentLimits, AgentTrajectory, ToolExecutor, run_agent
from nemo_gym_prorl.agent.prompts import PromptError, initial_messages, row_messages
from nemo_gym_prorl.llm.access import LLMAccess
from nemo_gym_prorl.llm.dialects.structured import TrajectoryConstraint, decoding_summary
from nemo_gym_prorl.llm.staleness import BASE_VERSION
from nemo_gym_prorl.llm.tito import TokenSession
from nemo_gym_prorl.llm.toolcalls import tool_call_to_openai
from nemo_gym_prorl.pipeline.handler import InvalidInstanceError, RolloutFailure
from nemo_gym_prorl.pipeline.job import Evaluation, Job, Trajectory
from nemo_gym_prorl.sandbox import SandboxSpec
from nemo_gym_prorl.tasks.base import EvalOutcome, TaskDomain
from nemo_gym_prorl.tasks.workspace import Workspace, open_workspace
from nemo_gym_prorl.tools import ALL_TOOLS
from nemo_gym_prorl.tools.dispatch import ToolBoxConfig

# Stop reasons that are a normal end of a trajectory (ProRL's `end_properly`).
PROPER_ENDS = frozenset({"submitted", "answered"})


class ToolServiceUnavailableError(RuntimeError):
    """Whatever serves the tools could not be reached (connection refused, reset, timeout, 5xx):
    an infrastructure failure of the rollout, not a mistake the model made."""


class RolloutTransport(Protocol):
    """Where a rollout's tools run and how it is scored: the part of a rollout that differs
    between the in-process service and a NeMo Gym resources server.

    - `open(job)`: INIT; returns a state with a `tools` attribute (a `ToolExecutor`) and a
      `commands` attribute (a `CommandExecutor`, where a harness's commands run). Cleans up
      after itself when it raises.
    - `finish_run(job, state, agent, trajectory, model)`: after the agent loop; adds what EVAL
      and the caller need to `trajectory` (artifacts, a response body) or raises
      `RolloutFailure`. `model` is the served model name the session used.
    - `evaluate(job, state, trajectory)`: EVAL; `state` is None unless `eval_needs_run_state`.
    - `release(state)`: idempotent, never raises.
    - `validate(instance)`: at submit, before any work: raise `InvalidInstanceError` naming the
      field this transport cannot run (the prompt itself is checked by the handler).
    """

    eval_needs_run_state: bool

    def validate(self, instance: Mapping[str, Any]) -> None: ...

    async def open(self, job: Job) -> Any: ...

    async def finish_run(
        self, job: Job, state: Any, agent: AgentTrajectory, trajectory: Trajectory, model: str
    ) -> None: ...

    async def evaluate(self, job: Job, state: Any | None, trajectory: Trajectory) -> Evaluation: ...

    async def release(self, state: Any) -> None: ...


class AgentRolloutHandler:
    """The pipeline's `RolloutHandler` for an agent rollout over any `RolloutTransport`.

    A stage that cannot produce a result raises `RolloutFailure`; the pipeline records its class
    (whose fault, which HTTP status) on the job's result.
    """

    def __init__(
        self,
        transport: RolloutTransport,
        llm: LLMAccess,
        *,
        limits: AgentLimits | None = None,
        aliases: tuple[str, ...] = (),
        harness: HarnessRunner | None = None,
    ) -> None:
        self.transport = transport
        self.llm = llm
        self.limits = limits or AgentLimits()
        # None: the built-in agent loop; else a harness drives RUN through the recording endpoint.
        self.harness = harness
        self.aliases = aliases  # the `data_source` values it serves (ProRL routes jobs by them)
        self.eval_needs_run_state = transport.eval_needs_run_state

    # -- at submit --------------------------------------------------------------------------------
    def validate(self, instance: Mapping[str, Any]) -> None:
        """Refuse, naming the field, an instance no rollout can be made of: no prompt (a row
        without `responses_create_params.input`), fields of the wrong type, unknown tools."""
        params = instance.get("responses_create_params")
        if not isinstance(params, Mapping):
            what = "is missing" if params is None else f"must be an object, not {type(params).__name__}"
            raise InvalidInstanceError("responses_create_params", f"{what} (the prompt is its `input`)")
        if "input" not in params:
            raise InvalidInstanceError("responses_create_params.input", "is missing (the prompt)")
        tools = params.get("tools")
        if tools is not None and not isinstance(tools, list):
            raise InvalidInstanceError("responses_create_params.tools", "must be a list of tools")
        try:
            row_messages(instance)
        except PromptError as exc:
            raise InvalidInstanceError("responses_create_params.input", str(exc)) from None
        self.transport.validate(instance)

    async def check_instance(self, instance: Mapping[str, Any]) -> None:
        """The transport's check at submit that must await (a Gym resources server's
        `/check_instance`), after `validate`; nothing for a transport whose `validate` says all."""
        check = getattr(self.transport, "check_instance", None)
        if check is not None:
            await check(instance)

    # -- INIT -------------------------------------------------------------------------------------
    async def init(self, job: Job) -> Any:
        try:
            return await self.transport.open(job)
        except RolloutFailure as failure:
            raise failure from None

    # -- RUN --------------------------------------------------------------------------------------
    async def run(self, job: Job, state: Any) -> Trajectory:
        if self.harness is not None:
            agent = await self.harness.run(job, state.commands, self.llm, self.limits)
            trajectory = to_trajectory(agent, [], {}, trainer_step=job.policy_version)
            return await self._finished(job, state, agent, trajectory, await self.llm.model_name())
        tools: ToolExecutor = state.tools
        specs = tools.specs()
        style = self.llm.tool_prompt
        try:
            messages = initial_messages(job.instance, specs, style=style)
        except PromptError as exc:
            raise RolloutFailure("data", f"cannot build the prompt: {exc}") from exc
        model = await self.llm.model_name()
        session = TokenSession(
            self.llm.pool,
            self.llm.dialect,
            model=model,
            sampling=self.llm.sampling_for(job.sampling_params),
            tools=specs if style == "template" and specs else None,
            trajectory_id=job.id,
            max_model_len=self.llm.max_model_len,
            constraint=TrajectoryConstraint(
                tools=specs,
                answer_pattern=answer_pattern(job.instance),
                submit_pattern=submit_pattern(job.instance),
            ),
        )
        try:
            agent = await run_agent(session, tools, messages, self.limits)
        except ToolServiceUnavailableError as exc:
            raise RolloutFailure("infrastructure", f"tool call failed: {exc}") from exc
        finally:
            session.close()
        trajectory = to_trajectory(agent, specs, {}, trainer_step=job.policy_version)
        return await self._finished(job, state, agent, trajectory, model)

    async def _finished(
        self, job: Job, state: Any, agent: AgentTrajectory, trajectory: Trajectory, model: str
    ) -> Trajectory:
        try:
            await self.transport.finish_run(job, state, agent, trajectory, model)
        except RolloutFailure as failure:
            raise failure from None
        return trajectory

    # -- EVAL -------------------------------------------------------------------------------------
    async def evaluate(self, job: Job, state: Any | None, trajectory: Trajectory) -> Evaluation:
        return await self.transport.evaluate(job, state, trajectory)

    async def release(self, state: Any) -> None:
        await self.transport.release(state)

    async def aclose(self) -> None:
        """What the transport and the harness hold beyond single rollouts, where they hold any."""
        close = getattr(self.transport, "aclose", None)
        if close is not None:
            await close()
        if self.harness is not None:
            await self.harness.aclose()


# -- tools in this process --------------------------------------------------------------------------


@dataclass
class InProcessState:
    workspace: Workspace
    artifacts: dict[str, Any] = field(default_factory=dict)

    @property
    def tools(self) -> ToolExecutor:
        return self.workspace.tools

    @property
    def commands(self) -> CommandExecutor:
        """Where a harness's commands run: this rollout's sandbox."""
        return SandboxExecutor(self.workspace.sandbox)


class InProcessTransport:
    """Tools in a sandbox this process opens (`tasks.workspace`); EVAL by the domain's own
    evaluator in fresh sandboxes (the RUN sandbox is already closed by then)."""

    eval_needs_run_state = False

    def __init__(
        self,
        domain: TaskDomain,
        *,
        sandbox: SandboxSpec | None = None,
        tools: ToolBoxConfig | None = None,
        offer_tools: bool = True,
    ) -> None:
        self.domain = domain
        self.sandbox_base = sandbox or SandboxSpec()
        self.tool_config = tools or ToolBoxConfig()
        # False for a harness, which runs its commands in the sandbox itself.
        self.offer_tools = offer_tools

    def validate(self, instance: Mapping[str, Any]) -> None:
        offered = instance.get("tools_offered")
        if offered is not None:
            if not isinstance(offered, list) or not all(isinstance(t, str) for t in offered):
                raise InvalidInstanceError("tools_offered", "must be a list of tool names")
            unknown = sorted(set(offered) - set(ALL_TOOLS))
            if unknown:
                raise InvalidInstanceError(
                    "tools_offered", f"unknown tools {unknown}; this service offers {sorted(ALL_TOOLS)}"
                )
        self.domain.check_row(instance)

    async def open(self, job: Job) -> InProcessState:
        row = job.instance
        names = [*self.domain.tool_names(row), FINISH_TOOL] if self.offer_tools else []
        workspace = await open_workspace(self.domain, row, self.sandbox_base, self.tool_config, names)
        return InProcessState(workspace)

    async def finish_run(
        self, job: Job, state: InProcessState, agent: AgentTrajectory, trajectory: Trajectory, model: str
    ) -> None:
        state.artifacts = await self.domain.collect_artifacts(state.workspace.sandbox, job.instance)
        trajectory.artifacts = dict(state.artifacts)
        # ProRL's result carries the SWE patch at the top level; so does ours.
        patch = state.artifacts.get("git_patch")
        trajectory.git_patch = patch if isinstance(patch, str) else None

    async def evaluate(self, job: Job, state: InProcessState | None, trajectory: Trajectory) -> Evaluation:
        if trajectory.infrastructure_failed:
            outcome = EvalOutcome.infra_failure(f"inference failed: {trajectory.failure}")
        else:
            outcome = await self.domain.evaluate(job.instance, trajectory.final_answer, trajectory.artifacts)
        return outcome.to_evaluation()

    async def release(self, state: InProcessState) -> None:
        await state.workspace.close()

    async def aclose(self) -> None:
        """The domain's pooled processes (grader workers, warm test runners)."""
        await self.domain.aclose()


def domain_rollout_handler(
    domain: TaskDomain,
    llm: LLMAccess,
    *,
    sandbox: SandboxSpec | None = None,
    limits: AgentLimits | None = None,
    tools: ToolBoxConfig | None = None,
    harness: HarnessRunner | None = None,
) -> AgentRolloutHandler:
    """The in-process rollout handler of one task domain: the built-in agent loop over the
    domain's tools, or `harness` with the domain's sandbox."""
    return AgentRolloutHandler(
        InProcessTransport(domain, sandbox=sandbox, tools=tools, offer_tools=harness is None),
        llm,
        limits=limits,
        # A row's `data_source` selects the built-in agent; a harness is selected by task name.
        aliases=tuple(domain.data_sources) if harness is None else (),
        harness=harness,
    )


def to_trajectory(
    agent: AgentTrajectory,
    tool_specs: list[dict[str, Any]],
    artifacts: Mapping[str, Any],
    *,
    trainer_step: int | None = None,
) -> Trajectory:
    """The pipeline's trajectory: messages with each assistant turn's token fields (ProRL's
    `token_ids`/`input_ids`/`logprobs` and NeMo Gym's three fields), plus the agent's record.
    A turn no published policy stamped ran on `trainer_step` (a trainer that refits its own
    backends says so on the job), else on the base model (version 0)."""
    if agent.reply_positions is not None:
        replies = dict(zip(agent.reply_positions, agent.tokens.turns, strict=True))
    else:
        positions = [i for i, m in enumerate(agent.messages) if m.get("role") == "assistant"]
        replies = dict(zip(positions, agent.tokens.turns, strict=False))
    messages: list[dict[str, Any]] = []
    for position, message in enumerate(agent.messages):
        out = {
            k: v
            for k, v in message.items()
            if k not in ("prompt_token_ids", "generation_token_ids", "generation_log_probs")
        }
        turn = replies.get(position)
        if turn is not None and message.get("role") == "assistant":
            out.update(
                prompt_token_ids=turn.prompt_token_ids,
                generation_token_ids=turn.generation_token_ids,
                generation_log_probs=turn.generation_log_probs,
                input_ids=turn.prompt_token_ids,
                token_ids=turn.generation_token_ids,
                logprobs=turn.generation_log_probs,
                finish_reason=turn.finish_reason,
            )
            if turn.tool_calls:
                # OpenAI's wire shape: `arguments` is a JSON string, as the chat API sends it.
                out["tool_calls"] = [tool_call_to_openai(c) for c in turn.tool_calls]
        messages.append(out)
    failure = agent.tokens.failure
    return Trajectory(
        messages=messages,
        tools=tool_specs,
        finish=agent.stop_reason in PROPER_ENDS,
        end_properly=agent.stop_reason in PROPER_ENDS,
        stop_reason=agent.stop_reason,
        final_answer=agent.final_answer,
        artifacts=dict(artifacts),
        # ProRL's result carries the SWE patch at the top level; so does ours.
        git_patch=artifacts.get("git_patch"),
        steps=[s.model_dump() for s in agent.steps],
        num_turns=agent.num_turns,
        generated_tokens=agent.generated_tokens,
        tool_errors=sum(1 for s in agent.steps if s.is_error),
        http_retries=agent.tokens.http_retries,
        reroutes=[r.model_dump() for r in agent.tokens.reroutes],
        infrastructure_failed=agent.infrastructure_failed,
        decoding=decoding_summary(agent.tokens.turns),
        harness=agent.harness,
        policy_versions=list(
            dict.fromkeys(
                (v if v is not None else trainer_step or BASE_VERSION) for v in agent.tokens.policy_versions
            )
        ),
        failure=failure.model_dump() if failure else None,
    )
