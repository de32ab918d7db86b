"""One task domain + the agent loop = a pipeline `RolloutHandler`.

    INIT  open the domain's sandbox, let it set up the workspace, start its tools
    RUN   a token-exact session on the backend pool; the agent loop; pull artifacts out
    EVAL  the domain's evaluator (its own fresh sandboxes; the RUN one is already closed)

The handler owns nothing between stages but the `RolloutState` it returns from `init`, which
the pipeline releases exactly once. The LLM pool is shared by all rollouts and outlives them.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from nemo_gym_prorl.agent.loop import FINISH_TOOL, AgentLimits, AgentTrajectory, run_agent
from nemo_gym_prorl.agent.prompts import ToolPromptStyle, initial_messages
from nemo_gym_prorl.llm.dialects.base import Dialect
from nemo_gym_prorl.llm.errors import InferenceError
from nemo_gym_prorl.llm.pool import LLMBackendPool
from nemo_gym_prorl.llm.records import SamplingParams
from nemo_gym_prorl.llm.tito import TokenSession
from nemo_gym_prorl.pipeline.job import Evaluation, Job, Trajectory
from nemo_gym_prorl.sandbox import Sandbox, SandboxSpec, open_sandbox
from nemo_gym_prorl.tasks.base import EvalOutcome, TaskDomain
from nemo_gym_prorl.tools.dispatch import ToolBox, ToolBoxConfig

# Stop reasons that are a normal end of a trajectory (ProRL's `end_properly`).
PROPER_ENDS = frozenset({"submitted", "answered"})


class ModelDiscoveryError(InferenceError):
    """No served model name was configured and no backend would say which it serves."""


@dataclass
class LLMAccess:
    """How rollouts reach the policy: a shared pool, its dialect, the served model name, and
    whether tools are described in the system prompt or through the server's chat template."""

    pool: LLMBackendPool
    dialect: Dialect
    model: str | None = None
    default_sampling: SamplingParams = field(default_factory=SamplingParams)
    max_model_len: int | None = None
    tool_prompt: ToolPromptStyle = "system"

    async def model_name(self) -> str:
        """The configured name, or the one the first healthy backend lists at /v1/models."""
        if self.model is None:
            self.model = await discover_model(self.pool)
        return self.model

    def sampling_for(self, job: Job) -> SamplingParams:
        """The trainer's per-job sampling fields override the defaults, validated (a bad value
        fails the job with the reason); unknown ones are ignored (ProRL clients send extras
        such as `stop`)."""
        known = {k: v for k, v in job.sampling_params.items() if k in SamplingParams.model_fields}
        return SamplingParams.model_validate({**self.default_sampling.model_dump(), **known})


@dataclass
class RolloutState:
    sandbox: Sandbox
    tools: ToolBox
    facts: dict[str, Any]
    artifacts: dict[str, Any] = field(default_factory=dict)


class AgentRolloutHandler:
    """A `RolloutHandler` for any `TaskDomain`."""

    eval_needs_run_state = False

    def __init__(
        self,
        domain: TaskDomain,
        llm: LLMAccess,
        *,
        sandbox: SandboxSpec | None = None,
        limits: AgentLimits | None = None,
        tools: ToolBoxConfig | None = None,
    ) -> None:
        self.domain = domain
        self.llm = llm
        self.sandbox_base = sandbox or SandboxSpec()
        self.limits = limits or AgentLimits()
        self.tool_config = tools or ToolBoxConfig()

    @property
    def aliases(self) -> tuple[str, ...]:
        """The `data_source` values this handler serves (ProRL routes jobs by them)."""
        return self.domain.data_sources

    # -- INIT -------------------------------------------------------------------------------------
    async def init(self, job: Job) -> RolloutState:
        row = job.instance
        spec = self.domain.sandbox_spec(row, self.sandbox_base)
        # Apptainer's instance start blocks for seconds: keep the event loop free.
        sandbox = await asyncio.to_thread(open_sandbox, spec)
        try:
            facts = await self.domain.setup_workspace(sandbox, row)
            names = [*self.domain.tool_names(row), FINISH_TOOL]
            config = self.tool_config.model_copy(update={"tools": list(dict.fromkeys(names))})
            return RolloutState(sandbox=sandbox, tools=ToolBox(sandbox, config), facts=facts)
        except BaseException:
            sandbox.close()
            raise

    # -- RUN --------------------------------------------------------------------------------------
    async def run(self, job: Job, state: RolloutState) -> Trajectory:
        specs = state.tools.specs()
        style = self.llm.tool_prompt
        messages = initial_messages(job.instance, specs, style=style)
        session = TokenSession(
            self.llm.pool,
            self.llm.dialect,
            model=await self.llm.model_name(),
            sampling=self.llm.sampling_for(job),
            tools=specs if style == "template" else None,
            trajectory_id=job.id,
            max_model_len=self.llm.max_model_len,
        )
        try:
            agent = await run_agent(session, state.tools, messages, self.limits)
        finally:
            session.close()
        state.artifacts = await self.domain.collect_artifacts(state.sandbox, job.instance)
        return to_trajectory(agent, specs, state.artifacts)

    # -- EVAL -------------------------------------------------------------------------------------
    async def evaluate(self, job: Job, state: RolloutState | None, trajectory: Trajectory) -> Evaluation:
        extra = trajectory.model_extra or {}
        if extra.get("infrastructure_failed"):
            outcome = EvalOutcome.infra_failure(f"inference failed: {extra.get('failure')}")
        else:
            outcome = await self.domain.evaluate(
                job.instance, extra.get("final_answer"), extra.get("artifacts")
            )
        return outcome.to_evaluation()

    async def release(self, state: RolloutState) -> None:
        with contextlib.suppress(Exception):
            await state.tools.close()
        state.sandbox.close()


def to_trajectory(
    agent: AgentTrajectory, tool_specs: list[dict[str, Any]], artifacts: Mapping[str, Any]
) -> Trajectory:
    """The pipeline's trajectory: messages with each assistant turn's token fields (ProRL's
    `token_ids`/`input_ids`/`logprobs` and NeMo Gym's three fields), plus the agent's record."""
    turns = {turn.turn: turn for turn in agent.tokens.turns}
    messages: list[dict[str, Any]] = []
    assistant_index = 0
    for message in agent.messages:
        out = {
            k: v
            for k, v in message.items()
            if k not in ("prompt_token_ids", "generation_token_ids", "generation_log_probs")
        }
        if message.get("role") == "assistant" and assistant_index in turns:
            turn = turns[assistant_index]
            assistant_index += 1
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
                out["tool_calls"] = [
                    {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                    for c in turn.tool_calls
                ]
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
        reroutes=[r.model_dump() for r in agent.tokens.reroutes],
        infrastructure_failed=agent.infrastructure_failed,
        failure=failure.model_dump() if failure else None,
    )


async def discover_model(pool: LLMBackendPool) -> str:
    for endpoint in pool.stats().endpoints:
        if not endpoint.healthy:
            continue
        try:
            response = await pool.client.get(f"{endpoint.address}/v1/models", timeout=10)
            models = response.json().get("data") or []
            if response.status_code == 200 and models and isinstance(models[0].get("id"), str):
                return str(models[0]["id"])
        except (httpx.HTTPError, ValueError, AttributeError):
            continue
    raise ModelDiscoveryError(
        "no model name configured (llm.model) and no healthy backend lists one at /v1/models"
    )
