# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Program-written demonstrations: the cold-start data of `prorl train`.

The embedded SmolLM2-135M earns nothing on the math tasks on its own (no tool call, no reward),
so sampling cannot find a first reward for RL to reinforce. A short program shows it what a
competent agent does instead, one task at a time:

    1. it reads the task's inputs from the row (reasoning-gym's metadata: the expression of an
       arithmetic task, the numbers of a gcd task, ...; never the expected answer),
    2. writes the `ipython` call that computes the result, in the model's own tool-call markup,
    3. runs it through the service's real tools: the math task's workspace opened exactly as a
       rollout's INIT opens it (`agent.handler.InProcessTransport`), the call answered by the
       same `ToolBox`, so the observation is the sandbox's real output,
    4. answers from that observation in the domain's format (`\\boxed{...}`),
    5. is scored by the task's real evaluator; only demonstrations with reward 1 are kept.

Why these families (`heldout.DEFAULT_FAMILIES`): basic arithmetic, gcd, lcm and fraction
simplification are solved by one line of Python into which the question's own numbers are
copied (`print(-8 + -5)`, `print(math.gcd(841, 549))`, `print(Fraction(6640, 19420))`), and the
answer is the printed value copied into `\\boxed{}`. That is a skill a 135M model can learn
from a few hundred examples, and it is exactly tool use: the model cannot compute a gcd of
three-digit numbers in its head, the tool can. Simple equations are available too (the
equation is rewritten into a sympy call, a harder copy). GSM-style word problems are left out:
a program cannot read them without already knowing the answer.

Token ids are the ones a rollout of the service would record for the same conversation, made
by the service's own code on the running backend: the prompts by the `vllm` dialect's
`next_prompt` (the backend's `/tokenize` with the chat template vLLM applies, the template's
closing tokens bridged, tool messages appended as a token suffix), an assistant turn as the
backend's tokenization of its text followed by the end-of-turn token the model samples to stop.
Nothing is re-tokenized at training time. The demonstrator is a data generator of the training
command only: it is no dialect, backend or model, nothing in a rollout or an evaluation can
select it, and it refuses held-out tasks.

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
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from nemo_gym_prorl.agent.handler import InProcessState, InProcessTransport
from nemo_gym_prorl.agent.prompts import initial_messages
from nemo_gym_prorl.datasets.rows import write_jsonl
from nemo_gym_prorl.llm.access import LLMAccess, LLMConfig
from nemo_gym_prorl.llm.dialects import TurnContext, VLLMCompletionsDialect
from nemo_gym_prorl.llm.dialects.replies import check_token_ids
from nemo_gym_prorl.llm.pool import Route
from nemo_gym_prorl.llm.records import ChatMessage, SamplingParams, ToolCall
from nemo_gym_prorl.llm.toolcalls import parse_tool_calls, tool_call_to_openai
from nemo_gym_prorl.pipeline.job import Job, Trajectory
from nemo_gym_prorl.sandbox import SandboxSpec
from nemo_gym_prorl.tasks.math import MathConfig, MathTask
from nemo_gym_prorl.tools.dispatch import ToolBoxConfig, ToolObservation
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
    program_code,
    tool_call_text,
    value_of,
)

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

    split: SeedSplit = Field(default_factory=SeedSplit, description="families and seed ranges (train side)")
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
    concurrency: int = Field(2, ge=1, le=64, description="Tasks demonstrated at once.")
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


class Demonstrator:
    """Writes demonstrations for rows through one LLM access (its pool must be started) and the
    math task's real tools and evaluator. `close()` releases the evaluator's workers."""

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
        self.transport = InProcessTransport(self.domain, sandbox=config.sandbox, tools=config.tools)

    async def close(self) -> None:
        await self.domain.aclose()

    async def demonstrate(self, row: Mapping[str, Any]) -> Demonstration:
        """One demonstration of `row`; raises `DemonstrationDropped(reason)` when it is not one to keep."""
        code = program_code(row)
        recipe = Recipe(
            family=row["reasoning_gym"]["family"],
            seed=row["reasoning_gym"]["seed"],
            split=row.get("split", "train"),
        )
        if recipe.split != "train":
            # Demonstrations are training data: the held-out tasks must stay unseen.
            raise ValueError(
                f"row {row.get('task_id')!r} is a held-out task; only training tasks are demonstrated"
            )
        job = Job(
            id=f"demonstration-{recipe.family}-{recipe.seed}",
            task="math",
            instance=dict(row),
            sampling_params={},
            priority=0,
            active_time_s=300.0,
            wall_time_s=None,
            group_id=None,
            metadata={"origin": ORIGIN},
        )
        model = await self.llm.model_name()
        state: InProcessState = await self.transport.open(job)
        route = Route(key=job.id)
        try:
            writer = _Conversation(self, job, state, model, route)
            first = [m.to_wire() for m in initial_messages(row, writer.specs, style=self.llm.tool_prompt)]
            call = ToolCall(id="", name="ipython", arguments={"code": code})
            observations = await writer.turn(first, tool_call_text(call, self.dialect.tool_call_format))
            value = value_of(observations[0])
            if value is None:
                raise DemonstrationDropped("tool_failed")
            await writer.turn(writer.pending, answer_text(value))
            final_answer = writer.final_content
            evaluation = await self.transport.evaluate(
                job, None, Trajectory(final_answer=final_answer, artifacts={})
            )
        finally:
            self.llm.pool.end_trajectory(route)
            await self.transport.release(state)
        if evaluation.reward != 1.0:
            raise DemonstrationDropped(str(evaluation.report.get("reason") or "unrewarded"))
        return writer.demonstration(recipe, evaluation.reward, evaluation.reward_components)


class _Conversation:
    """One demonstration's turns: the ids a `TokenSession` would hold, built by the same dialect."""

    def __init__(
        self, owner: Demonstrator, job: Job, state: InProcessState, model: str, route: Route
    ) -> None:
        self.owner = owner
        self.job = job
        self.state = state
        self.model = model
        self.route = route
        self.specs = state.tools.specs()
        # The tool list goes to the chat template only in the `template` style, as in a rollout.
        self.template_tools = self.specs if owner.llm.tool_prompt == "template" and self.specs else None
        self.messages: list[dict[str, Any]] = []
        self.pending: list[dict[str, Any]] = []
        self.prompts: list[list[int]] = []
        self.generations: list[list[int]] = []
        self.tool_calls = 0
        self.final_content: str | None = None
        self.max_model_len: int | None = owner.llm.max_model_len

    def _context(self, new_messages: list[dict[str, Any]]) -> TurnContext:
        history = [*self.prompts[-1], *self.generations[-1]] if self.prompts else []
        return TurnContext(
            pool=self.owner.llm.pool,
            route=self.route,
            model=self.model,
            sampling=SamplingParams(),
            tools=self.template_tools,
            messages=self.messages,
            new_messages=new_messages,
            history_ids=history,
            last_generation_ids=self.generations[-1] if self.generations else [],
            turn=len(self.prompts),
            max_model_len=self.max_model_len,
        )

    async def _assistant_ids(self, ctx: TurnContext, text: str) -> list[int]:
        """What the model samples to write `text` and end its turn: the backend's tokenization of
        the text, then the template's end-of-turn token (the first token it writes after an
        assistant message; vLLM returns it among the generated ids when the model stops)."""
        probe = await self.owner.dialect.template_probe(ctx)
        tokenized, _ = await ctx.pool.post_json(
            "/tokenize",
            {"model": self.model, "prompt": text, "add_special_tokens": False},
            route=self.route,
            parse=_parse_tokens,
        )
        return [*tokenized.tokens, *probe.close_ids[:1]]

    async def turn(self, new_messages: list[dict[str, Any]], text: str) -> list[ToolObservation]:
        """Append `new_messages`, then the assistant's `text`; run its tool calls, as the agent
        loop does. Returns the observations (their tool messages wait in `pending`)."""
        ctx = self._context(new_messages)
        prompt, server_max_len = await self.owner.dialect.next_prompt(ctx)
        self.max_model_len = self.max_model_len or server_max_len
        if prompt[: len(ctx.history_ids)] != ctx.history_ids:
            raise DemonstrationError(f"turn {ctx.turn}: the prompt does not continue the trajectory's tokens")
        generation = await self._assistant_ids(ctx, text)
        if self.max_model_len is not None and len(prompt) + len(generation) > self.max_model_len:
            raise DemonstrationDropped("context_length")
        fmt = self.owner.dialect.tool_call_format
        parsed = parse_tool_calls(text, fmt, turn=ctx.turn, tool_specs=self.specs)
        if parsed.errors:
            raise DemonstrationError(
                f"the demonstrator wrote a tool call its own parser rejects: {parsed.errors}"
            )
        self.prompts.append(prompt)
        self.generations.append(generation)
        self.messages.extend(new_messages)
        assistant: dict[str, Any] = {"role": "assistant", "content": text}
        if parsed.calls:
            assistant["tool_calls"] = [tool_call_to_openai(c) for c in parsed.calls]
        self.messages.append(assistant)
        self.final_content = parsed.content if not parsed.calls else None
        observations: list[ToolObservation] = []
        self.pending = []
        for call in parsed.calls:
            observation = await self.state.tools.call(call.name, call.arguments)
            observations.append(observation)
            self.tool_calls += 1
            self.pending.append(
                ChatMessage(
                    role="tool", content=observation.text, tool_call_id=call.id, name=call.name
                ).to_wire()
            )
        return observations

    def demonstration(self, recipe: Recipe, reward: float, components: Mapping[str, float]) -> Demonstration:
        """The token record: the first prompt, then every later token with its mask (the
        assistant's generations 1; the bridge and the new messages each later prompt adds 0)."""
        first = self.prompts[0]
        completion: list[int] = []
        mask: list[int] = []
        for index, generation in enumerate(self.generations):
            if index:
                added = self.prompts[index][len(first) + len(completion) :]
                completion.extend(added)
                mask.extend([0] * len(added))
            completion.extend(generation)
            mask.extend([1] * len(generation))
        return Demonstration(
            recipe=recipe,
            task_id=str(self.job.instance.get("task_id")),
            data_source=str(self.job.instance.get("data_source")),
            messages=self.messages,
            prompt_ids=first,
            completion_ids=completion,
            env_mask=mask,
            reward=reward,
            reward_components=dict(components),
            model=self.model,
            tool_call_format=self.owner.dialect.tool_call_format,
            turns=len(self.generations),
            tool_calls=self.tool_calls,
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
    if not config.llm.backends:
        raise DemonstrationError(
            "demonstrations need the running backend the rollouts use (llm.backends): its tokenizer "
            "and chat template make the token ids"
        )
    started = time.monotonic()
    budget = int(n * config.max_tries_factor) + 8
    rows = enumerate(config.split.iter_train_rows())
    for _ in range(config.start):
        next(rows, None)
    kept: dict[int, Demonstration] = {}
    dropped: Counter[str] = Counter()
    tried = 0
    llm = LLMAccess.from_config(config.llm)
    await llm.pool.start()

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

    try:
        demonstrator = Demonstrator(config, llm)
        await llm.model_name()
        try:
            async with asyncio.TaskGroup() as group:
                for _ in range(config.concurrency):
                    group.create_task(worker())
        finally:
            await demonstrator.close()
    except ExceptionGroup as errors:
        # A worker's error (backend gone, sandbox unusable) stops the step: say it plainly.
        raise errors.exceptions[0] from None
    finally:
        await llm.pool.aclose()
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
