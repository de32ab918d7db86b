# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Program-written demonstrations: the cold-start data of `prorl train`.

The embedded SmolLM2-135M earns nothing on the math tasks on its own (no tool call, no reward),
so sampling cannot find a first reward for RL to reinforce. A short program shows it what a
competent agent does instead, one task at a time, through the service's own rollout path:

    1. it reads the task's inputs from the row (reasoning-gym's metadata: the expression of an
       arithmetic task, the numbers of a gcd task, ...; never the expected answer),
    2. a rollout of the math task runs as any rollout does (`AgentRolloutHandler` over the
       task's `InProcessTransport`: INIT opens the workspace, the agent loop calls the model and
       the same `ToolBox`, EVAL is the task's real evaluator), except that the model call is
       answered by the program (`ProgramDialect`): first the `ipython` call that computes the
       result, in the model's own tool-call markup, then the answer read from the sandbox's real
       observation, in the domain's format (`\\boxed{...}`),
    3. only demonstrations with reward 1 are kept.

Why these families (`heldout.DEFAULT_FAMILIES`): basic arithmetic, gcd, lcm and fraction
simplification are solved by one line of Python into which the question's own numbers are
copied (`print(-8 + -5)`, `print(math.gcd(841, 549))`, `print(Fraction(6640, 19420))`), and the
answer is the printed value copied into `\\boxed{}`. That is a skill a 135M model can learn
from a few hundred examples, and it is exactly tool use: the model cannot compute a gcd of
three-digit numbers in its head, the tool can. Simple equations are available too (the
equation is rewritten into a sympy call, a harder copy). GSM-style word problems are left out:
a program cannot read them without already knowing the answer.

Token ids are the ones the rollout records, made by the service's own code on the running
backend: the prompts by the `vllm` dialect's `next_prompt` (the backend's `/tokenize` with the
chat template vLLM applies, the template's closing tokens bridged, tool messages appended as a
token suffix), an assistant turn as the backend's tokenization of the program's text followed by
the end-of-turn token the model samples to stop; the record's ids and mask are assembled by the
trainer's own `concatenate`. Nothing is re-tokenized at training time. The program is a data
generator of the training command only: `ProgramDialect` is built here for one demonstration,
no rollout or evaluation of the service can select it, and held-out tasks are refused.

How `prorl train` calls it (its `demonstrations:` section validated into `DemonstrationConfig`,
`llm.backends` set to the backend it serves the rollouts from, `split` shared with the RL and
evaluation steps):

    summary = write_demonstrations(run_dir / "demonstrations.jsonl", 256, config, progress=say)
    # JSONL of `Demonstration`; `read_demonstrations(path)` reads it back for SFT, the loss on
    # `env_mask == 1`. `summary`: keep rate, drops by reason, seconds, token lengths.

From a running event loop, `await collect_demonstrations(n, config)` returns them instead.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from nemo_gym_prorl.agent.handler import AgentRolloutHandler, InProcessTransport
from nemo_gym_prorl.agent.harness import make_harness
from nemo_gym_prorl.agent.loop import AgentLimits
from nemo_gym_prorl.datasets.rows import write_jsonl
from nemo_gym_prorl.llm.access import LLMAccess, LLMConfig
from nemo_gym_prorl.llm.dialects import TurnContext, VLLMCompletionsDialect
from nemo_gym_prorl.llm.dialects.base import Dialect, Generation
from nemo_gym_prorl.llm.dialects.replies import check_token_ids
from nemo_gym_prorl.llm.records import ToolCall
from nemo_gym_prorl.pipeline.job import Job, Trajectory
from nemo_gym_prorl.rollouts.results import ServiceTrajectory, concatenate, model_turns
from nemo_gym_prorl.sandbox import SandboxSpec
from nemo_gym_prorl.tasks.math import MathConfig, MathTask
from nemo_gym_prorl.tasks.swe import SweConfig, SweTask
from nemo_gym_prorl.tools.dispatch import ToolBoxConfig
from nemo_gym_prorl.training.demonstration_records import (
    ORIGIN,
    PROGRAM,
    Demonstration,
    DemonstrationSummary,
    Recipe,
    TokenStats,
)
from nemo_gym_prorl.training.heldout import SeedSplit
from nemo_gym_prorl.training.programs import (
    PROGRAMS,
    DemonstrationError,
    answer_text,
    harness_compute_text,
    harness_submit_text,
    observed_output,
    program_code,
    tool_call_text,
    value_of,
)
from nemo_gym_prorl.training.swe_programs import replies as swe_replies
from nemo_gym_prorl.training.swe_split import SweSplit

__all__ = [
    "ORIGIN",
    "PROGRAM",
    "PROGRAMS",
    "Demonstration",
    "DemonstrationConfig",
    "DemonstrationDropped",
    "DemonstrationError",
    "DemonstrationSummary",
    "Demonstrator",
    "Recipe",
    "TokenStats",
    "answer_text",
    "collect_demonstrations",
    "demonstrate_rows",
    "program_code",
    "read_demonstrations",
    "tool_call_text",
    "value_of",
    "write_demonstrations",
]


# -- configuration ----------------------------------------------------------------------------


class DemonstrationConfig(BaseModel):
    """The demonstrations step of `prorl train` (its `demonstrations:` section)."""

    model_config = ConfigDict(extra="forbid")

    split: SeedSplit | SweSplit = Field(
        default_factory=SeedSplit,
        description="where the training rows come from: math families and seed ranges, or SWE projects",
    )
    start: int = Field(0, ge=0, description="First training task (skip tasks other steps use).")
    llm: LLMConfig = Field(
        default_factory=LLMConfig,
        description="the backend whose tokenizer and chat template make the ids: the one the "
        "rollouts use (`backends` is required)",
    )
    sandbox: SandboxSpec = Field(default_factory=SandboxSpec)
    tools: ToolBoxConfig = Field(
        default_factory=ToolBoxConfig,
        description="the math task's tool limits (keep them the service's: `tasks.math.options.tools`)",
    )
    math: MathConfig = Field(default_factory=MathConfig)
    swe: SweConfig = Field(
        default_factory=SweConfig,
        description="where SWE instances live (a harness demonstrates SWE rows too)",
    )
    concurrency: int = Field(2, ge=1, le=64, description="Tasks demonstrated at once.")
    harness: dict[str, Any] | None = Field(
        None,
        description="an agent harness's options (`{name: mini_swe_agent, config: ...}`): the harness, "
        "unchanged, drives each demonstration through the recording endpoint, and the program writes "
        "its replies in the harness's own format (a bash block) instead of tool calls",
    )
    max_tries_factor: float = Field(
        2.0, ge=1.0, description="Give up after n * this many tasks tried (plus 8)."
    )


# -- the demonstrator ---------------------------------------------------------------------------


class DemonstrationDropped(Exception):
    """A task whose demonstration is not kept (its tool call failed, or it was not rewarded)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _Tokenized(BaseModel):
    tokens: list[int]


def _parse_tokens(data: Any) -> _Tokenized:
    result = _Tokenized.model_validate(data)
    check_token_ids(result.tokens, "tokenize.tokens")
    return result


class ProgramWriter:
    """What the program writes in one demonstration, turn by turn: the `ipython` call that
    computes the task's answer, then the answer read from the tool's observation."""

    def __init__(self, code: str, tool_call_format: str) -> None:
        self.call = tool_call_text(
            ToolCall(id="", name="ipython", arguments={"code": code}), tool_call_format
        )
        self.tool_failed = False

    def text(self, ctx: TurnContext) -> str:
        if ctx.turn == 0:
            return self.call
        observed = [m.get("content") or "" for m in ctx.new_messages if m.get("role") == "tool"]
        value = value_of(observed[-1]) if observed else None
        if value is None:
            self.tool_failed = True
            return "The tool gave no value."
        return answer_text(value)


class HarnessProgramWriter(ProgramWriter):
    """The same program in a bash harness's format: `python3 -c` in a bash block, then the value
    the harness observed submitted as the harness submits (`programs.harness_submit_text`)."""

    def __init__(self, row: Mapping[str, Any]) -> None:
        self.call = harness_compute_text(row)
        self.tool_failed = False

    def text(self, ctx: TurnContext) -> str:
        if ctx.turn == 0:
            return self.call
        observed = [m.get("content") or "" for m in ctx.new_messages if m.get("role") == "user"]
        value = value_of(observed_output(observed[-1])) if observed else None
        if value is None:
            self.tool_failed = True
            return "The command gave no value."
        return harness_submit_text(value)


class SweHarnessProgramWriter(ProgramWriter):
    """A SWE fix in a bash harness's format (`swe_programs.replies`: locate, read, edit, submit),
    from the instance's gold patch; dropped when the edit did not run cleanly."""

    EDIT = 2

    def __init__(self, patch: str) -> None:
        self.replies = swe_replies(patch)
        self.tool_failed = False

    def text(self, ctx: TurnContext) -> str:
        if ctx.turn == self.EDIT + 1:
            observed = [m.get("content") or "" for m in ctx.new_messages if m.get("role") == "user"]
            if not observed or "<returncode>0</returncode>" not in observed[-1]:
                self.tool_failed = True
                return "The edit did not run."
        return self.replies[min(ctx.turn, len(self.replies) - 1)]


class ProgramDialect(Dialect):
    """The program standing in for the model call of a rollout, and for nothing else: the prompt
    is the `vllm` dialect's (`next_prompt`, the backend's own rendering), the "generation" is
    the backend's tokenization of the program's text followed by the end-of-turn token the model
    samples to stop. It lives here, not among `llm.dialects`: no rollout of the service can
    select it, and it is built only for one demonstration. Its turns carry no log-probs (0.0):
    demonstrations are data for SFT, never trained on as the policy's samples."""

    name: ClassVar[str] = "program-written demonstration"

    def __init__(self, prompts: VLLMCompletionsDialect, writer: ProgramWriter) -> None:
        self.prompts = prompts
        self.writer = writer
        self.tool_call_format = prompts.tool_call_format

    async def generate(self, ctx: TurnContext) -> Generation:
        prompt, server_max_len = await self.prompts.next_prompt(ctx)
        text = self.writer.text(ctx)
        probe = await self.prompts.template_probe(ctx)
        tokenized, _ = await ctx.pool.post_json(
            "/tokenize",
            {"model": ctx.model, "prompt": text, "add_special_tokens": False},
            route=ctx.route,
            parse=_parse_tokens,
        )
        ids = [*tokenized.tokens, *probe.close_ids[:1]]
        limit = ctx.max_model_len or server_max_len
        if limit is not None and len(prompt) + len(ids) > limit:
            return Generation.exhausted(prompt, limit)
        return Generation(
            prompt_token_ids=prompt,
            generation_token_ids=ids,
            generation_log_probs=[0.0] * len(ids),
            finish_reason="stop",
            text=text,
            max_model_len=server_max_len,
        )


class Demonstrator:
    """Writes demonstrations for rows through the service's own rollout path: the math task's
    in-process transport (INIT opens the workspace, the tools are the same `ToolBox`, EVAL is
    the task's real evaluator) and the agent loop of `AgentRolloutHandler`, with the program
    standing in only for the model call (`ProgramDialect`). The LLM access's pool must be
    started. `close()` releases the evaluator's workers."""

    def __init__(self, config: DemonstrationConfig, llm: LLMAccess) -> None:
        if not isinstance(llm.dialect, VLLMCompletionsDialect):
            raise DemonstrationError(
                f"demonstration ids come from the `vllm` dialect's prompts; the LLM access uses "
                f"{llm.dialect.name!r}"
            )
        tool_call_text(ToolCall(id="", name="ipython", arguments={}), llm.dialect.tool_call_format)
        self.config = config
        self.llm = llm
        self.dialect: VLLMCompletionsDialect = llm.dialect
        self.domain = MathTask(config.math)
        # A harness runs its own commands in the sandbox; the built-in loop is offered the tools.
        self.harness = make_harness(config.harness) if config.harness is not None else None
        self.transport = InProcessTransport(
            self.domain, sandbox=config.sandbox, tools=config.tools, offer_tools=self.harness is None
        )
        # SWE fixes are demonstrated in a harness's format only (its bash blocks edit the repository).
        self.swe = SweTask(config.swe) if self.harness is not None else None
        self.swe_transport = (
            InProcessTransport(self.swe, sandbox=config.sandbox, tools=config.tools, offer_tools=False)
            if self.swe is not None
            else None
        )

    async def close(self) -> None:
        if self.harness is not None:
            await self.harness.aclose()
        await self.domain.aclose()
        if self.swe is not None:
            await self.swe.aclose()

    async def demonstrate(self, row: Mapping[str, Any]) -> Demonstration:
        """One demonstration of `row` (a math task, or with a harness a SWE instance); raises
        `DemonstrationDropped(reason)` when it is not one to keep."""
        split = row.get("split", "train")
        if split != "train":
            # Demonstrations are training data: the held-out tasks must stay unseen.
            raise ValueError(
                f"row {row.get('task_id')!r} is a held-out task; only training tasks are demonstrated"
            )
        is_swe = row.get("data_source") in SweTask.data_sources
        if is_swe and self.swe is not None and self.swe_transport is not None:
            instance = self.swe.resolve_instance(
                row
            )  # its gold patch: the program's source, never the policy's
            recipe = Recipe(family="swe", instance_id=str(instance["instance_id"]), split=split)
            writer: ProgramWriter = SweHarnessProgramWriter(str(instance["patch"]))
            return await self._rollout(row, recipe, writer, self.swe_transport, "swe", max_turns=6)
        if is_swe:
            raise DemonstrationError(
                "a SWE fix is demonstrated through a harness (`harness:`), not tool calls"
            )
        recipe = Recipe(family=row["reasoning_gym"]["family"], seed=row["reasoning_gym"]["seed"], split=split)
        writer = (
            ProgramWriter(program_code(row), self.dialect.tool_call_format)
            if self.harness is None
            else HarnessProgramWriter(row)
        )
        return await self._rollout(row, recipe, writer, self.transport, "math", max_turns=2)

    async def _rollout(
        self,
        row: Mapping[str, Any],
        recipe: Recipe,
        writer: ProgramWriter,
        transport: InProcessTransport,
        task: str,
        *,
        max_turns: int,
    ) -> Demonstration:
        """The service's rollout path with the program in the model's seat, then the real EVAL."""
        access = replace(self.llm, dialect=ProgramDialect(self.dialect, writer))
        handler = AgentRolloutHandler(
            transport, access, limits=AgentLimits(max_turns=max_turns), harness=self.harness
        )
        job = Job(
            id=f"demonstration-{recipe.task}",
            task=task,
            instance=dict(row),
            sampling_params={},
            priority=0,
            active_time_s=300.0,
            wall_time_s=None,
            group_id=None,
            metadata={"origin": ORIGIN},
        )
        handler.validate(job.instance)
        state = await handler.init(job)
        try:
            trajectory = await handler.run(job, state)
            evaluation = await handler.evaluate(job, state, trajectory)
        finally:
            await handler.release(state)
        if trajectory.failure is not None:
            raise DemonstrationError(f"the demonstration's rollout failed: {trajectory.failure}")
        if writer.tool_failed:
            raise DemonstrationDropped("tool_failed")
        if evaluation.reward != 1.0:
            raise DemonstrationDropped(str(evaluation.report.get("reason") or "unrewarded"))
        return demonstration_of(
            trajectory, recipe, evaluation.reward, evaluation.reward_components, job, access
        )


def demonstration_of(
    trajectory: Trajectory,
    recipe: Recipe,
    reward: float,
    components: Mapping[str, float],
    job: Job,
    llm: LLMAccess,
) -> Demonstration:
    """The record of a rewarded demonstration: its token ids and mask assembled as the trainer
    assembles any rollout's (`rollouts.results.concatenate`), its messages in wire form."""
    service = ServiceTrajectory.model_validate(trajectory.model_dump(mode="json"))
    turns = model_turns(service)
    if not turns or not service.messages[-1].get("role") == "assistant":
        raise DemonstrationError("the demonstration's rollout did not end with the program's answer")
    first = next(m for m in service.messages if m.get("role") == "assistant")
    if trajectory.harness is not None:
        # The harness's whole conversation must be the one sequence trained on: every call merged.
        if trajectory.harness.get("segments") != 1 or not trajectory.steps:
            raise DemonstrationError(
                f"the harness's demonstration is not one token sequence with a command run "
                f"({trajectory.harness.get('segments')} segments, {len(trajectory.steps)} commands)"
            )
    elif not first.get("tool_calls"):
        raise DemonstrationError("the service's parser read no tool call in the program's first turn")
    prompt, completion, _, env_mask = concatenate(turns)
    return Demonstration(
        recipe=recipe,
        task_id=str(job.instance.get("task_id")),
        data_source=str(job.instance.get("data_source")),
        messages=[{k: v for k, v in m.items() if k not in _TOKEN_FIELDS} for m in service.messages],
        prompt_ids=prompt,
        completion_ids=completion,
        env_mask=env_mask,
        reward=reward,
        reward_components=dict(components),
        model=llm.model or "",
        tool_call_format=llm.dialect.tool_call_format,
        turns=len(turns),
        tool_calls=len(trajectory.steps),
    )


# The token fields a rollout's messages carry (the record keeps them once, as ids and a mask).
_TOKEN_FIELDS = frozenset(
    {
        "prompt_token_ids",
        "generation_token_ids",
        "generation_log_probs",
        "input_ids",
        "token_ids",
        "logprobs",
        "finish_reason",
        "policy_version",
        "decoding",
        "backend",
    }
)


# -- the step `prorl train` calls ----------------------------------------------------------------


async def collect_demonstrations(
    n: int,
    config: DemonstrationConfig | None = None,
    *,
    progress: Callable[[str], None] | None = None,
) -> tuple[list[Demonstration], DemonstrationSummary]:
    """Up to `n` rewarded demonstrations of the split's training tasks, in task order, with the
    summary of the attempt (`path` empty). Tasks are tried in order until `n` are kept or
    `n * max_tries_factor + 8` were tried."""
    config = config or DemonstrationConfig()
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    started = time.monotonic()
    budget = int(n * config.max_tries_factor) + 8
    rows = enumerate(config.split.iter_train_rows())
    for _ in range(config.start):
        next(rows, None)
    kept: dict[int, Demonstration] = {}
    dropped: Counter[str] = Counter()
    tried = 0

    async def worker() -> None:
        # Workers take tasks in order and stop taking them once n are kept: a prefix of the
        # training tasks is tried, and the first n rewarded ones are the result.
        nonlocal tried
        while len(kept) < n and tried < budget:
            position, row = next(rows, (None, None))
            if row is None:
                return
            tried += 1
            try:
                kept[position] = await demonstrator.demonstrate(row)
            except DemonstrationDropped as drop:
                dropped[drop.reason] += 1
            if progress is not None:
                progress(f"demonstrations: {min(len(kept), n)}/{n} kept, {sum(dropped.values())} dropped")

    async with _running(config) as demonstrator:
        await _in_workers(worker, config.concurrency)
    if not kept:
        raise DemonstrationError(f"no demonstration was rewarded in {tried} tasks (dropped: {dict(dropped)})")
    chosen = [kept[p] for p in sorted(kept)][:n]
    seconds = time.monotonic() - started
    summary = DemonstrationSummary(
        path="",
        requested=n,
        kept=len(chosen),
        tried=tried,
        keep_rate=round(len(kept) / tried, 4),
        dropped=dict(dropped),
        families=dict(Counter(d.recipe.family for d in chosen)),
        seconds=round(seconds, 2),
        seconds_per_demonstration=round(seconds / tried, 3),
        prompt_tokens=TokenStats.of(len(d.prompt_ids) for d in chosen),
        completion_tokens=TokenStats.of(len(d.completion_ids) for d in chosen),
        model_tokens=TokenStats.of(d.model_token_count for d in chosen),
    )
    return chosen, summary


async def demonstrate_rows(
    rows: Sequence[Mapping[str, Any]], config: DemonstrationConfig | None = None
) -> tuple[dict[str, Demonstration], dict[str, int]]:
    """A demonstration of each of these training rows, by task id, and how many rows were
    dropped for each reason (a row whose program's answer was not rewarded has none). The
    guidance of GRPO's rehearsal groups: one kept demonstration stands beside the policy's own
    samples of the same task."""
    config = config or DemonstrationConfig()
    pending = list(rows)
    kept: dict[str, Demonstration] = {}
    dropped: Counter[str] = Counter()

    async def worker() -> None:
        while pending:
            row = pending.pop(0)
            try:
                kept[str(row["task_id"])] = await demonstrator.demonstrate(row)
            except DemonstrationDropped as drop:
                dropped[drop.reason] += 1

    async with _running(config) as demonstrator:
        await _in_workers(worker, config.concurrency)
    return kept, dict(dropped)


@asynccontextmanager
async def _running(config: DemonstrationConfig) -> AsyncIterator[Demonstrator]:
    """A demonstrator on the config's backend, its pool started and everything released after."""
    if not config.llm.backends:
        raise DemonstrationError(
            "demonstrations need the running backend the rollouts use (llm.backends): its tokenizer "
            "and chat template make the token ids"
        )
    llm = LLMAccess.from_config(config.llm)
    await llm.pool.start()
    try:
        demonstrator = Demonstrator(config, llm)
        try:
            await llm.model_name()
            yield demonstrator
        finally:
            await demonstrator.close()
    finally:
        await llm.pool.aclose()


async def _in_workers(worker: Callable[[], Awaitable[None]], concurrency: int) -> None:
    try:
        async with asyncio.TaskGroup() as group:
            for _ in range(concurrency):
                group.create_task(worker())
    except ExceptionGroup as errors:
        # A worker's error (backend gone, sandbox unusable) stops the step: say it plainly.
        raise errors.exceptions[0] from None


def write_demonstrations(
    path: str | Path,
    n: int,
    config: DemonstrationConfig | None = None,
    *,
    progress: Callable[[str], None] | None = None,
) -> DemonstrationSummary:
    """Write up to `n` program-written demonstrations to `path` (JSONL, one `Demonstration` a
    line) and return what happened: the entry point of `prorl train`'s cold-start step. Needs the
    backend the rollouts use (`config.llm.backends`) and the sandbox runtime."""
    demonstrations, summary = asyncio.run(collect_demonstrations(n, config, progress=progress))
    write_jsonl(path, (d.model_dump(mode="json") for d in demonstrations))
    return summary.model_copy(update={"path": str(path)})


def read_demonstrations(path: str | Path) -> list[Demonstration]:
    """The demonstrations of a file `write_demonstrations` wrote (validated)."""
    from nemo_gym_prorl.datasets.rows import read_jsonl

    return [Demonstration.model_validate(line) for line in read_jsonl(path)]
