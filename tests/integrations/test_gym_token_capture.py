# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""A harness rollout's recorded calls, written as NeMo Gym 0.7 token-capture records and read
back through Gym's own consumer and builder: Gym's file store passes Gym's conformance suite as the
project's sink, a one-segment rollout comes back as exactly the sample the project's trainer
builds, a rollout whose history broke is never joined across the break, and malformed records are
refused before anything is written."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from nemo_gym.token_id_capture import (
    FileLineageStore,
    ParentResolutionStatus,
    TokenCaptureStore,
    TokenEntry,
)
from nemo_gym.token_id_capture.conformance import run_conformance
from support.fake_llm import HARNESS_SYSTEM, HARNESS_TASK, FakeLLM

from nemo_gym_prorl.integrations.gym.token_capture import (
    SEGMENT_BREAK_REASON,
    HarnessRecordError,
    call_id,
    chain_fields,
    read_rollout,
    response_fields,
    token_entries,
    write_harness_record,
)
from nemo_gym_prorl.llm.access import LLMAccess
from nemo_gym_prorl.llm.dialects.vllm import VLLMCompletionsDialect
from nemo_gym_prorl.llm.pool import LLMBackendPool, PoolConfig
from nemo_gym_prorl.llm.recording import (
    CallRecord,
    ChatRequest,
    HarnessRecord,
    RecordingSession,
    SegmentRecord,
)
from nemo_gym_prorl.llm.records import SamplingParams, TrajectoryTokens, TurnRecord
from nemo_gym_prorl.rollouts.results import ModelTurn, NotTokenExactError, concatenate

SYSTEM, TASK = HARNESS_SYSTEM, HARNESS_TASK
MODEL = "policy-model"


# --- how the records are made -------------------------------------------------------------------


@pytest.fixture
async def recording() -> AsyncIterator[Callable[[], RecordingSession]]:
    """Recording sessions answered by a scripted fake backend (character tokenizer, ChatML)."""
    backend = await FakeLLM(responder=lambda prompt: "```bash\nls\n```").start()
    try:
        async with LLMBackendPool(PoolConfig(backends=[backend.url], request_timeout_s=10)) as pool:
            access = LLMAccess(pool=pool, dialect=VLLMCompletionsDialect(), model="fake")
            yield lambda: RecordingSession(access, sampling=SamplingParams(max_tokens=32))
    finally:
        await backend.kill()


async def call(session: RecordingSession, messages: list[dict[str, Any]]) -> dict[str, Any]:
    """One harness call; the assistant message as an OpenAI client hands it back."""
    reply = await session.complete(ChatRequest.model_validate({"model": "any", "messages": messages}))
    return {**reply["choices"][0]["message"], "refusal": None}


def trainer_fields(turns: Sequence[TurnRecord]) -> tuple[list[int], list[int], list[float], list[int]]:
    """What the project's trainer builds for one segment."""
    return concatenate([ModelTurn.model_validate(turn.model_dump()) for turn in turns])


def turn(index: int, prompt: list[int], generation: list[int], **fields: Any) -> TurnRecord:
    return TurnRecord(
        turn=index,
        prompt_token_ids=prompt,
        generation_token_ids=generation,
        generation_log_probs=[-0.1 * (i + 1) for i in range(len(generation))],
        finish_reason="stop",
        text="x" * len(generation),
        content="x" * len(generation),
        dialect="vllm-completions",
        **fields,
    )


def harness_record(*segments: list[TurnRecord]) -> HarnessRecord:
    """A record built directly from the pydantic models (no backend)."""
    return HarnessRecord(
        trajectory_id="traj",
        segments=[
            SegmentRecord(
                index=i,
                calls=len(turns),
                tokens=TrajectoryTokens(
                    trajectory_id=f"traj-s{i}",
                    dialect="vllm-completions",
                    turns=turns,
                    reroutes=[],
                    finish_reason="stop",
                    context_exhausted=False,
                    failure=None,
                    http_attempts=len(turns),
                    http_retries=0,
                ),
            )
            for i, turns in enumerate(segments)
        ],
        calls=[
            CallRecord(
                segment=i,
                merged=position > 0,
                messages=1,
                new_messages=1,
                finish_reason="stop",
                generated_tokens=len(t.generation_token_ids),
                seconds=0.0,
            )
            for i, turns in enumerate(segments)
            for position, t in enumerate(turns)
        ],
    )


# --- Gym's store is the project's sink, and it conforms -----------------------------------------


async def test_gyms_file_store_as_the_projects_sink_passes_gyms_conformance_suite(tmp_path: Path) -> None:
    passed = await run_conformance(
        lambda: TokenCaptureStore(tmp_path),
        lambda: TokenCaptureStore(tmp_path),
        lambda: FileLineageStore(tmp_path),
    )
    assert passed == [
        "put_then_freeze_visibility",
        "idempotent_reput",
        "conflicting_reput",
        "mark_incomplete_durability",
        "freeze_idempotency",
        "post_freeze_write_safety",
        "conditional_retirement",
        "lineage_visibility",
        "fresh_client_lineage_visibility",
        "begin_call_custody",
    ]


# --- one segment: Gym delivers exactly the project's sample -------------------------------------


@pytest.mark.parametrize("delta_prompts", [False, True], ids=["full-prompts", "delta-prompts"])
async def test_a_one_segment_rollout_rebuilt_by_gym_is_the_projects_sample(
    recording: Callable[[], RecordingSession], tmp_path: Path, delta_prompts: bool
) -> None:
    session = recording()
    history = [SYSTEM, TASK]
    for output in ("a.py", "b.py", "done"):
        reply = await call(session, history)
        history = [*history, reply, {"role": "user", "content": output}]
    session.close()
    record = session.record()
    assert len(record.segments) == 1 and len(record.turns) == 3

    written = await write_harness_record(
        record, rollout_id="task-7-r0", model=MODEL, sink=tmp_path, delta_prompts=delta_prompts
    )
    # Each turn has the previous one as its parent; the first is the rollout's root.
    ids = [call_id(record, 0, position) for position in range(3)]
    assert [e.model_call_id for e in written] == ids
    assert [e.parent_resolution for e in written] == [
        ParentResolutionStatus.ROOT,
        ParentResolutionStatus.RESOLVED,
        ParentResolutionStatus.RESOLVED,
    ]
    assert [e.parent_call_id for e in written] == [None, ids[0], ids[1]]
    assert [e.prompt_is_delta for e in written] == [False, delta_prompts, delta_prompts]

    gym = await read_rollout("task-7-r0", tmp_path, model=MODEL)
    assert gym.mask_sample is False
    assert gym.result["metrics"]["chains"] == 1 and gym.result["metrics"]["delivered_fraction"] == 1.0
    expected = trainer_fields(record.turns)
    # The delivered response, and Gym's chain itself: the same ids, mask and log-probs.
    assert response_fields(gym.result["rebuilt_response"]) == expected
    assert [chain_fields(chain) for chain in gym.chains] == [expected]
    _, _, log_probs, mask = expected
    assert sum(mask) == sum(len(t.generation_token_ids) for t in record.turns)
    assert [lp for lp, m in zip(log_probs, mask, strict=True) if m] == [
        lp for t in record.turns for lp in t.generation_log_probs
    ]


# --- two segments: never joined across the break ------------------------------------------------


async def test_a_rollout_whose_history_broke_is_two_gym_chains_and_gym_masks_it(
    recording: Callable[[], RecordingSession], tmp_path: Path
) -> None:
    session = recording()
    reply = await call(session, [SYSTEM, TASK])
    await call(session, [SYSTEM, TASK, reply, {"role": "user", "content": "go"}])
    # The harness summarises its history: the next call does not extend the first sequence.
    summary = {"role": "user", "content": "Summary so far: nothing works."}
    reply = await call(session, [SYSTEM, summary])
    await call(session, [SYSTEM, summary, reply, {"role": "user", "content": "next"}])
    session.close()
    record = session.record()
    first, second = (segment.tokens.turns for segment in record.segments)
    assert (len(first), len(second)) == (2, 2)
    with pytest.raises(NotTokenExactError):
        trainer_fields([*first, *second])  # the two sequences cannot be one sample

    written = await write_harness_record(record, rollout_id="task-7-r1", model=MODEL, sink=tmp_path)
    break_call = call_id(record, 1, 0)
    assert [e.parent_resolution for e in written] == [
        ParentResolutionStatus.ROOT,
        ParentResolutionStatus.RESOLVED,
        ParentResolutionStatus.UNRESOLVED,
        ParentResolutionStatus.RESOLVED,
    ]
    assert written[2].parent_call_id is None and written[2].parent_resolution_reason == SEGMENT_BREAK_REASON

    gym = await read_rollout("task-7-r1", tmp_path, model=MODEL)
    # Gym's verdict: two chains, one per segment, an unresolved fragment, and the rollout masked.
    assert gym.mask_sample is True
    assert gym.result["unresolved_parent_calls"] == [break_call]
    metrics = gym.result["metrics"]
    assert (metrics["chains"], metrics["roots"]) == (2, 2)
    assert metrics["parent_link_failures"] == {"parent_unresolved": 1}
    assert 0 < metrics["delivered_fraction"] < 1
    chains = {chain.chain_id: chain for chain in gym.chains}
    assert sorted(chains) == ["branch-0", "main"]
    # Each chain is exactly one segment's sample: no token sequence joined across the break.
    assert [link.entry.model_call_id for link in chains["main"].links] == [
        call_id(record, 0, i) for i in (0, 1)
    ]
    assert [link.entry.model_call_id for link in chains["branch-0"].links] == [
        break_call,
        call_id(record, 1, 1),
    ]
    assert chain_fields(chains["main"]) == trainer_fields(first)
    assert chain_fields(chains["branch-0"]) == trainer_fields(second)
    # What Gym would deliver (masked) is the first segment alone.
    assert response_fields(gym.result["rebuilt_response"]) == trainer_fields(first)

    # Naming the scored call (the last one) does not repair it: its chain crosses the break.
    attributed = await read_rollout(
        "task-7-r1", tmp_path, model=MODEL, terminal_call_id=call_id(record, 1, 1)
    )
    assert attributed.mask_sample is True
    assert attributed.result["metrics"]["terminal_attribution"]["chain"] == "broken"


def test_the_policy_version_is_carried_and_survives_gyms_store(tmp_path: Path) -> None:
    record = harness_record([turn(0, [1, 2], [3, 4], policy_version=5), turn(1, [1, 2, 3, 4, 9], [7])])
    entries = token_entries(record, rollout_id="r", model=MODEL)
    store = TokenCaptureStore(tmp_path)
    for entry in entries:
        store.append(entry)
    read = store.read_entries("r")
    assert [entry.model_extra for entry in read] == [
        {"policy_version": 5},
        {"policy_version": None},
    ]


# --- what is refused ----------------------------------------------------------------------------


def test_a_log_prob_count_that_is_not_the_id_count_is_refused() -> None:
    record = harness_record([turn(0, [1, 2], [3, 4])])
    record.segments[0].tokens.turns[0].generation_log_probs.append(-0.5)  # pydantic does not re-check
    with pytest.raises(HarnessRecordError, match=r"segment 0, turn 0: 2 generated ids but 3 log-probs"):
        token_entries(record, rollout_id="r", model=MODEL)


async def test_nothing_is_written_for_a_refused_record(tmp_path: Path) -> None:
    record = harness_record([turn(0, [1, 2], [3, 4]), turn(1, [1, 2, 3, 4, 5], [6])])
    record.segments[0].tokens.turns[1].generation_token_ids.append(7)
    with pytest.raises(HarnessRecordError, match="turn 1: 2 generated ids but 1 log-probs"):
        await write_harness_record(record, rollout_id="r", model=MODEL, sink=tmp_path)
    assert not TokenCaptureStore(tmp_path).path_for("r").exists()


@pytest.mark.parametrize(
    ("record", "match"),
    [
        (harness_record(), "has no model call recorded"),
        (harness_record([]), "has no model call recorded"),
        (
            harness_record([turn(0, [1, 2], [3]), turn(1, [1, 9, 3], [4])]),
            r"segment 0, turn 1: its prompt \(3 ids\) does not extend the previous turn",
        ),
    ],
    ids=["no-segment", "no-turn", "segment-not-extending"],
)
def test_an_empty_or_inconsistent_record_is_refused(record: HarnessRecord, match: str) -> None:
    with pytest.raises(HarnessRecordError, match=match):
        token_entries(record, rollout_id="r", model=MODEL)


def test_a_rollout_id_gyms_store_cannot_name_a_file_by_is_refused() -> None:
    with pytest.raises(HarnessRecordError, match="Invalid rollout id"):
        token_entries(harness_record([turn(0, [1], [2])]), rollout_id="../escape", model=MODEL)


async def test_a_sink_that_is_not_a_gym_token_sink_is_refused() -> None:
    with pytest.raises(TypeError, match="not a Gym TokenSink"):
        await write_harness_record(
            harness_record([turn(0, [1], [2])]), rollout_id="r", model=MODEL, sink=object()
        )  # type: ignore[arg-type]


class FailingSecondPut(TokenCaptureStore):
    """Gym's store, with a transport that loses the second write."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.puts = 0

    async def put(self, entry: TokenEntry) -> None:
        self.puts += 1
        if self.puts == 2:
            raise OSError("transport down")
        await super().put(entry)


async def test_a_failed_write_marks_the_rollout_incomplete_and_gym_masks_it(tmp_path: Path) -> None:
    record = harness_record([turn(0, [1, 2], [3]), turn(1, [1, 2, 3, 4], [5])])
    with pytest.raises(OSError, match="transport down"):
        await write_harness_record(record, rollout_id="r", model=MODEL, sink=FailingSecondPut(tmp_path))
    gym = await read_rollout("r", tmp_path)
    assert gym.mask_sample is True and gym.result["metrics"]["capture_incomplete"] is True
    assert (tmp_path / "r.tokens.incomplete").read_text() == f"{call_id(record, 0, 1)}\n"
