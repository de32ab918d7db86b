# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""A resumed collection re-runs nothing settled, within a named collection run.

Gym 0.7's own rollout collection (`RolloutCollectionHelper.run_from_config`, in process) runs four
rows through the environment server and the real agent app (scripted model, in-memory resources
server). Two rows finish; the model holds the other two at their first turn; then the collection
is killed (its task cancelled, which cancels its in-flight requests as Gym's servers do when a
caller goes away) and resumed with `resume_from_cache`, which re-dispatches the two rows that
left no record, as attempt 0. The model counts its calls by row.

With the environment server's `collection_run` set, the killed collection's rollouts keep
running, and the resume gets them from the agent's ledger: settled, or joined while they still
run, with no model call of its own. Without it, a collector that goes away cancels its
rollouts, and the resume runs them again (Gym numbers rollouts afresh in every run, so attempt 0
of a settled rollout id may be a new collection's).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections import Counter
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import nemo_gym.rollout_collection as gym_collection
import orjson
import pytest
from nemo_gym.rollout_collection import RolloutCollectionConfig
from support.environment_stack import EnvironmentStack
from support.gym_collection import CollectorClient, InProcessCollection
from support.gym_fakes import ANSWER, CALL, TOOL, FakeResources
from support.scripted_model import ScriptedDialect

from nemo_gym_prorl.llm.dialects.base import Generation, TurnContext
from nemo_gym_prorl.pipeline import PipelineConfig

ENVIRONMENT_SERVER = "prorl_agent_environment_server"
QUESTIONS = [1, 2, 3, 4]
HELD = {3, 4}  # the rows in flight when the collection is killed
TURNS = 2  # a rollout's model calls: the tool call, then the answer
_QUESTION = re.compile(r"What is (\d+)\+1\?")


class HeldModel(ScriptedDialect):
    """The scripted model (a tool call, then the answer), counting its calls by question; the
    first turn of a held question waits for `release`."""

    def __init__(self, held: set[int]) -> None:
        super().__init__([CALL, ANSWER])
        self.held = held
        self.release = asyncio.Event()
        self.asked: Counter[int] = Counter()
        self.holding = 0

    async def generate(self, ctx: TurnContext) -> Generation:
        match = _QUESTION.search(json.dumps([*ctx.messages, *ctx.new_messages]))
        assert match is not None, ctx.new_messages
        question = int(match.group(1))
        self.asked[question] += 1
        if question in self.held and ctx.turn == 0:
            self.holding += 1
            try:
                await self.release.wait()
            finally:
                self.holding -= 1
        return await super().generate(ctx)


def dataset_row(question: int) -> dict[str, Any]:
    return {
        "responses_create_params": {"input": [{"role": "user", "content": f"What is {question}+1?"}],
                                    "tools": [TOOL], "max_output_tokens": 64},
        "data_source": "prorl_math", "expected_answer": str(question + 1), "task_source": "prorl_agent",
    }  # fmt: skip


class Collection:
    """The stack (its environment server with `collection_run`), Gym's collection over it, and
    the rollouts file it writes."""

    def __init__(self, tmp_path: Path, collection_run: str | None) -> None:
        self.model = HeldModel(HELD)
        self.resources = FakeResources(reward=1.0)
        limits = {"collection_run": collection_run} if collection_run is not None else {}
        self.stack = EnvironmentStack(
            self.model,
            lambda: self.resources,
            {"prorl_math": "prorl_math"},
            # A worker for every row, so the held rows hold no other row back.
            pipeline=PipelineConfig(init_workers=4, run_workers=4, eval_workers=4),
            **limits,
        )
        self.client = CollectorClient(self.stack.global_config, {ENVIRONMENT_SERVER: self.stack.http})
        self.input = tmp_path / "rows.jsonl"
        self.output = tmp_path / "rollouts.jsonl"
        self.input.write_bytes(b"".join(orjson.dumps(dataset_row(q)) + b"\n" for q in QUESTIONS))

    async def collect(self, *, resume: bool = False) -> None:
        config = RolloutCollectionConfig(
            input_jsonl_fpath=str(self.input),
            output_jsonl_fpath=str(self.output),
            resume_from_cache=resume,
            disable_aggregation=True,
            # Gym's bounded dispatch, which cancels the requests it has in flight when it is stopped,
            # as a killed collector's dropped connections do (the unbounded one leaves them running).
            max_resident_rollout_tasks=len(QUESTIONS),
        )
        await InProcessCollection(self.client).run_from_config(config)

    async def collect_until_killed(self) -> None:
        """Collect until the free rows are recorded and the held ones wait on the model, then
        kill the collection."""
        collecting = asyncio.create_task(self.collect())
        await until(
            lambda: len(self.rollouts()) == len(QUESTIONS) - len(HELD) and self.model.holding == len(HELD)
        )
        collecting.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await collecting

    def rollouts(self) -> list[dict[str, Any]]:
        if not self.output.exists():
            return []
        return [orjson.loads(line) for line in self.output.read_bytes().splitlines() if line.strip()]

    def questions_recorded(self) -> list[int]:
        return sorted(
            int(_QUESTION.search(json.dumps(r["responses_create_params"]))[1]) for r in self.rollouts()
        )

    def model_calls(self) -> int:
        return sum(self.model.asked.values())


async def until(done: Callable[[], bool], timeout_s: float = 30.0) -> None:
    async with asyncio.timeout(timeout_s):
        while not done():  # noqa: ASYNC110 (the collection and the fakes have no event to wait on)
            await asyncio.sleep(0.01)


@pytest.fixture
async def make_collection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Callable[[str | None], Collection]]:
    made: list[Collection] = []

    def make(collection_run: str | None) -> Collection:
        made.append(Collection(tmp_path, collection_run))
        # Collection reads the composition from Gym's global config; here it is the stack's.
        monkeypatch.setattr(
            gym_collection, "get_global_config_dict", lambda *_, **__: made[-1].stack.global_config
        )
        return made[-1]

    yield make
    for collection in made:
        collection.model.release.set()
        await collection.stack.close()


async def test_a_resume_gets_the_killed_collections_settled_rollouts_without_a_model_call(
    make_collection,
) -> None:
    collection = make_collection("run-1")
    await collection.collect_until_killed()
    assert collection.questions_recorded() == [1, 2]

    # The killed collection's rollouts were left running, and settle.
    collection.model.release.set()
    await until(
        lambda: (
            all(collection.model.asked[q] == TURNS for q in HELD) and not collection.resources.open_sessions
        )
    )
    calls = collection.model_calls()
    assert calls == TURNS * len(QUESTIONS)
    dispatched = len(collection.client.runs())

    await collection.collect(resume=True)

    assert len(collection.client.runs()) == dispatched + len(HELD)  # Gym re-dispatched them...
    assert collection.model_calls() == calls  # ...and the resume made no model call
    assert collection.questions_recorded() == QUESTIONS
    assert all(r["reward"] == 1.0 for r in collection.rollouts())


async def test_a_resume_joins_the_killed_collections_rollouts_that_still_run(make_collection) -> None:
    collection = make_collection("run-1")
    await collection.collect_until_killed()
    dispatched = len(collection.client.runs())

    resuming = asyncio.create_task(collection.collect(resume=True))
    await until(lambda: len(collection.client.runs()) == dispatched + len(HELD))
    collection.model.release.set()
    await resuming

    assert {q: collection.model.asked[q] for q in QUESTIONS} == dict.fromkeys(
        QUESTIONS, TURNS
    )  # one rollout each
    assert collection.questions_recorded() == QUESTIONS


async def test_without_a_named_run_a_killed_collections_rollouts_are_cancelled_and_run_again(
    make_collection,
) -> None:
    collection = make_collection(None)
    await collection.collect_until_killed()
    await until(lambda: collection.model.holding == 0 and not collection.resources.open_sessions)  # cancelled

    collection.model.release.set()
    await collection.collect(resume=True)

    # Each held row: its first call, cut short by the cancel; then a whole rollout of the resume's.
    assert {q: collection.model.asked[q] for q in HELD} == dict.fromkeys(HELD, 1 + TURNS)
    assert collection.questions_recorded() == QUESTIONS


async def test_a_fresh_collection_is_a_new_run_only_under_a_new_name(make_collection) -> None:
    collection = make_collection("run-1")
    collection.model.release.set()
    await collection.collect()
    calls = collection.model_calls()
    assert calls == TURNS * len(QUESTIONS)

    # The same rows collected afresh under the same name are that run's: answered from the ledger.
    await collection.collect()
    assert collection.model_calls() == calls
    # Under another name (the environment server restarted with it), every rollout runs anew.
    collection.stack.server.config.collection_run = "run-2"
    await collection.collect()
    assert collection.model_calls() == 2 * calls
    assert collection.questions_recorded() == QUESTIONS
