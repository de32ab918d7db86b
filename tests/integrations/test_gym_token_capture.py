# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""A harness rollout's recorded calls, written as NeMo Gym 0.7 token-capture records and read
back through Gym's own consumer and builder: Gym's file store and the project's own sink both pass
Gym's conformance suite, a one-segment rollout comes back as exactly the sample the project's
trainer builds, a rollout whose history broke is never joined across the break, and malformed
records are refused before anything is written. On the harness path each call is a record before
the harness has its reply, and Gym's build of those records is what the trainer gets."""

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

from nemo_gym_prorl.agent.harness.capture_store import CaptureBackend, CaptureFull, CaptureStore
from nemo_gym_prorl.agent.harness.gym_capture import BROKEN_CHAIN, INCOMPLETE, HarnessCapture
from nemo_gym_prorl.agent.harness.token_capture import (
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


# --- Gym's store conforms (a finished record can go to it: `write_harness_record`) -------------


async def test_gyms_file_store_passes_gyms_conformance_suite(tmp_path: Path) -> None:
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


# --- the harness path: written as it runs, through the project's own sink, built by Gym --------


def project_store(max_bytes: int = 1 << 24) -> CaptureStore:
    return CaptureStore(CaptureBackend(max_bytes=max_bytes))


async def test_the_projects_own_sink_passes_gyms_conformance_suite() -> None:
    backend = CaptureBackend()  # fresh clients over one shared backend, as Gym's suite asks
    passed = await run_conformance(lambda: CaptureStore(backend), lambda: CaptureStore(backend))
    assert passed == [
        "put_then_freeze_visibility",
        "idempotent_reput",
        "conflicting_reput",
        "mark_incomplete_durability",
        "freeze_idempotency",
        "post_freeze_write_safety",
        "conditional_retirement",
    ]


def capturing(recording: Callable[[], RecordingSession], capture: HarnessCapture) -> RecordingSession:
    session = recording()
    session.trajectory_id = capture.trajectory_id
    session.on_turn = capture.write
    return session


async def test_each_call_is_a_gym_record_before_the_harness_gets_its_reply(
    recording: Callable[[], RecordingSession],
) -> None:
    store = project_store()
    capture = HarnessCapture(store, trajectory_id="task-7", model=MODEL)
    session = capturing(recording, capture)
    history = [SYSTEM, TASK]
    for count in (1, 2, 3):
        reply = await call(session, history)
        # The record is in the sink when the reply reaches the harness.
        assert len(store.backend.rollouts[capture.rollout_id].entries) == count
        history = [*history, reply, {"role": "user", "content": f"output {count}"}]
    record = session.record()
    frozen = await store.freeze(capture.rollout_id)
    # Exactly the entries the finished record makes, lineage and delta prompts included.
    expected = token_entries(record, rollout_id=capture.rollout_id, model=MODEL, delta_prompts=True)
    assert [e.model_dump() for e in frozen.entries] == [e.model_dump() for e in expected]


async def test_gym_delivers_the_scored_chain_as_the_trainers_sample_and_the_records_are_retired(
    recording: Callable[[], RecordingSession], tmp_path: Path
) -> None:
    store = project_store()
    capture = HarnessCapture(store, trajectory_id="task-7", model=MODEL)
    session = capturing(recording, capture)
    reply = await call(session, [SYSTEM, TASK])
    await call(session, [SYSTEM, TASK, reply, {"role": "user", "content": "a.py"}])
    record = session.record()
    delivery = await capture.deliver(call_id(record, 0, 1))

    assert delivery.mask_reason is None and delivery.undelivered == {}
    assert delivery.delivered_calls == [call_id(record, 0, 0), call_id(record, 0, 1)]
    assert delivery.fields is not None
    expected = trainer_fields(record.turns)
    assert (
        delivery.fields.prompt_ids,
        delivery.fields.completion_ids,
        delivery.fields.logprobs,
        delivery.fields.env_mask,
    ) == expected
    assert delivery.delivered_tokens == delivery.generated_tokens == sum(expected[3])
    assert store.bytes == 0 and capture.rollout_id not in store.backend.rollouts  # forgotten once built

    # The records the delivery carries are Gym's: its own file store and consumer rebuild the sample.
    gym_store = TokenCaptureStore(tmp_path)
    for entry in delivery.entries:
        gym_store.append(TokenEntry.model_validate(entry))
    gym = await read_rollout(delivery.rollout_id, tmp_path, terminal_call_id=delivery.terminal_call_id)
    assert gym.mask_sample is False and response_fields(gym.result["rebuilt_response"]) == expected


async def test_a_history_broken_before_the_scored_reply_masks_the_rollout_with_gyms_reason(
    recording: Callable[[], RecordingSession],
) -> None:
    capture = HarnessCapture(project_store(), trajectory_id="task-8", model=MODEL)
    session = capturing(recording, capture)
    await call(session, [SYSTEM, TASK])
    summary = {"role": "user", "content": "Summary so far: nothing works."}
    reply = await call(session, [SYSTEM, summary])
    await call(session, [SYSTEM, summary, reply, {"role": "user", "content": "next"}])
    record = session.record()
    delivery = await capture.deliver(call_id(record, 1, 1))

    assert delivery.chains == [[call_id(record, 0, 0)], [call_id(record, 1, 0), call_id(record, 1, 1)]]
    assert delivery.mask_reason is not None and delivery.mask_reason.startswith(BROKEN_CHAIN)
    assert "2 token sequences" in delivery.mask_reason
    assert delivery.fields is None and delivery.delivered_tokens == 0
    assert delivery.undelivered == {BROKEN_CHAIN: delivery.generated_tokens}


class FailingStore(CaptureStore):
    """The project's sink with a transport that loses the second write."""

    puts = 0

    async def put(self, entry: TokenEntry) -> None:
        self.puts += 1
        if self.puts == 2:
            raise OSError("transport down")
        await super().put(entry)


async def test_a_lost_record_never_fails_the_harness_call_and_gym_masks_the_rollout(
    recording: Callable[[], RecordingSession],
) -> None:
    capture = HarnessCapture(FailingStore(), trajectory_id="task-9", model=MODEL)
    session = capturing(recording, capture)
    history = [SYSTEM, TASK]
    for output in ("a.py", "b.py"):
        reply = await call(session, history)  # the second call's record is lost; its reply is not
        history = [*history, reply, {"role": "user", "content": output}]
    record = session.record()
    delivery = await capture.deliver(call_id(record, 0, 1))
    assert delivery.mask_reason is not None and delivery.mask_reason.startswith(INCOMPLETE)
    assert delivery.undelivered == {INCOMPLETE: delivery.generated_tokens}


async def test_the_sink_is_bounded_in_bytes_and_a_write_past_the_bound_masks_its_rollout(
    recording: Callable[[], RecordingSession],
) -> None:
    store = project_store(max_bytes=200)  # less than one call's record
    capture = HarnessCapture(store, trajectory_id="task-10", model=MODEL)
    session = capturing(recording, capture)
    await call(session, [SYSTEM, TASK])
    assert store.bytes == 0
    delivery = await capture.deliver(call_id(session.record(), 0, 0))
    assert delivery.mask_reason is not None and delivery.mask_reason.startswith(INCOMPLETE)
    with pytest.raises(CaptureFull, match="bound of 200"):
        await store.put(token_entries(session.record(), rollout_id="r", model=MODEL)[0])
