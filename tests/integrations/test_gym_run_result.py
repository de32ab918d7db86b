# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The body `/run` answers for a finished rollout: a harness rollout that is one token sequence is
a trainable result; one its harness split into several is masked, saying why, with every segment
still carried beside it; where Gym's builder built the rollout's token capture, its verdict is the
result's."""

from __future__ import annotations

from typing import Any

from nemo_gym_prorl.integrations.gym.contract import check_result
from nemo_gym_prorl.integrations.gym.response import output_items
from nemo_gym_prorl.integrations.gym.result import SPLIT_SEQUENCE, run_result
from nemo_gym_prorl.llm.records import TurnRecord
from nemo_gym_prorl.pipeline.job import JobResult, JobState, Trajectory
from nemo_gym_prorl.rollouts.delivery import TokenDelivery


def turn(i: int, prompt: list[int], ids: list[int]) -> TurnRecord:
    return TurnRecord(
        turn=i, prompt_token_ids=prompt, generation_token_ids=ids, generation_log_probs=[-0.1] * len(ids),
        finish_reason="stop", text="hi", content="hi", dialect="x",
    )  # fmt: skip


def finished(segments: list[list[TurnRecord]], capture: dict[str, Any] | None = None) -> JobResult:
    """A scored harness rollout whose response is its last segment, as the harness delivers it;
    `capture`: Gym's build of its token-capture records."""
    last = segments[-1]
    trajectory = Trajectory(
        messages=[{"role": "assistant", "content": "hi"}],
        num_turns=sum(len(s) for s in segments),
        generated_tokens=sum(len(t.generation_token_ids) for s in segments for t in s),
        end_properly=True,
        stop_reason="submitted",
        response={"output": output_items(last, [], "t")},
        harness={
            "name": "mini_swe_agent",
            "segments": len(segments),
            "token_segments": [[t.model_dump(mode="json") for t in s] for s in segments],
            **({"capture": capture} if capture is not None else {}),
        },
    )
    return JobResult(
        id="j1", task="math", state=JobState.DONE, submitted_at=0.0, reward=1.0, trajectory=trajectory
    )


ROW: dict[str, Any] = {"responses_create_params": {"input": [{"role": "user", "content": "2+2?"}]}}


def test_a_harness_rollout_of_one_sequence_is_a_trainable_result() -> None:
    body = run_result(ROW, finished([[turn(0, [1, 2], [3]), turn(1, [1, 2, 3, 4], [5])]]))
    assert body["mask_sample"] is False and "failure_kind" not in body
    assert check_result(body) == []


def test_a_harness_rollout_split_into_segments_is_masked_with_its_reason_and_keeps_every_segment() -> None:
    segments = [[turn(0, [1, 2], [3])], [turn(1, [1, 9], [5])]]
    body = run_result(ROW, finished(segments))
    assert body["mask_sample"] is True and body["instance_config"]["mask_sample"] is True
    assert body["failure_kind"] == SPLIT_SEQUENCE and "2 token sequences" in body["failure_reason"]
    assert (
        len(body["prorl"]["harness"]["token_segments"]) == 2
    )  # nothing dropped: a consumer that can, trains each
    assert body["reward"] == 1.0  # the reward is reported as scored; the mask says not to train on it


def test_where_gym_built_the_rollout_its_verdict_is_the_run_results() -> None:
    # Gym delivered the root call (the harness kept none of its replies): trainable.
    segments = [[turn(0, [1, 2], [3])], [turn(1, [1, 9], [5])]]
    delivered = TokenDelivery(rollout_id="r", terminal_call_id="j1-s0-t0", delivered_calls=["j1-s0-t0"])
    body = run_result(ROW, finished(segments, delivered.model_dump(mode="json")))
    assert body["mask_sample"] is False and "failure_kind" not in body
    # Gym masked it (the scored reply's chain starts at an unresolved call): masked, Gym's reason.
    broken = TokenDelivery(rollout_id="r", terminal_call_id="j1-s1-t0", mask_reason="the harness broke it")
    body = run_result(ROW, finished(segments, broken.model_dump(mode="json")))
    assert body["mask_sample"] is True and body["failure_reason"] == "the harness broke it"
