# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""A finished rollout becomes TRL's fields token for token, and the reward TRL sees is the
service's, with failed rollouts masked (None) rather than scored 0. A rollout any of whose turns
was sampled under constrained decoding is not the policy's free sample: it is masked too, and the
step's stats say why.

The rollouts are the service's own result models (`JobResult`, the assistant messages'
`TurnRecord` fields) serialized as `/v1/rollouts/wait` sends them; the conversion runs in the
model venv, where the trainer runs."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from trl_venv import run_in_model_venv

from nemo_gym_prorl.integrations.trl.grpo import rollout_fields, staleness_at_update
from nemo_gym_prorl.llm.dialects.structured import DecodingRecord, decoding_summary
from nemo_gym_prorl.llm.records import TurnRecord
from nemo_gym_prorl.pipeline.job import Evaluation, JobResult, JobState, Trajectory
from nemo_gym_prorl.rollouts.stats import RolloutStats

SYSTEM_AND_USER = [1, 10, 11, 12, 2, 1, 20, 21, 2, 1, 30]  # first prompt (chat markup + text)
CALL = [40, 41, 42, 2]  # the model's tool call, ending its message
OBSERVATION = [50, 1, 60, 61, 62, 2, 1, 30]  # newline, the tool message, the next assistant header
ANSWER = [70, 71, 2]


# What a turn sampled under `llm.constrained` records: a vLLM structural tag forcing a tool call.
FORCED_TOOL_CALL = DecodingRecord(
    mode="tool", tool_format="hermes", tools=["ipython"], max_string_length=2048
).model_dump()


def record(
    index: int, prompt: list[int], generated: list[int], logprobs: list[float], **extra: Any
) -> TurnRecord:
    return TurnRecord(
        turn=index,
        prompt_token_ids=prompt,
        generation_token_ids=generated,
        generation_log_probs=logprobs,
        finish_reason="stop",
        text="",
        content="",
        dialect="hermes",
        **extra,
    )


def turn(index: int, prompt: list[int], generated: list[int], logprobs: list[float]) -> dict[str, Any]:
    # What the agent's `to_trajectory` writes for an assistant message.
    message = record(index, prompt, generated, logprobs).assistant_message()
    return {**message.model_dump(exclude_none=True), "finish_reason": "stop"}


def result(
    job_id: str,
    *,
    messages: list[dict[str, Any]] | None = None,
    state: JobState = JobState.DONE,
    reward: float | None = 1.0,
    mask_sample: bool = False,
    stop_reason: str = "final_answer",
    decoding: dict[str, Any] | None = None,
) -> dict[str, Any]:
    evaluation = (
        Evaluation(reward=reward, reward_components={"correct": reward}) if reward is not None else None
    )
    return JobResult(
        id=job_id,
        task="math",
        state=state,
        group_id="g",
        submitted_at=0.0,
        reward=evaluation.reward if evaluation else None,
        reward_components=evaluation.reward_components if evaluation else {},
        trajectory=Trajectory(messages=messages or [], stop_reason=stop_reason, decoding=decoding)
        if messages is not None
        else None,
        report={"mask_sample": mask_sample, "detail": "sandbox lost"} if mask_sample else {},
        mask_sample=mask_sample,
        error="backend unreachable" if state is JobState.FAILED else None,
    ).model_dump(mode="json")


def two_turns() -> list[dict[str, Any]]:
    second_prompt = [*SYSTEM_AND_USER, *CALL, *OBSERVATION]
    return [
        {"role": "system", "content": "..."},
        {"role": "user", "content": "..."},
        turn(0, SYSTEM_AND_USER, CALL, [-0.1, -0.2, -0.3, -0.4]),
        {"role": "tool", "content": "42", "tool_call_id": "c0"},
        turn(1, second_prompt, ANSWER, [-0.5, -0.6, -0.7]),
        # A tool answer after the last model turn is in no prompt: the model never saw it.
        {"role": "tool", "content": "unused", "tool_call_id": "c1"},
    ]


CONVERT = """
import json, sys
from nemo_gym_prorl.integrations.trl.fields import group_samples, to_fields
from nemo_gym_prorl.integrations.trl.reward import service_reward
out = []
for group in json.load(sys.stdin):
    fields = to_fields(group_samples(group, fallback_prompt_ids=[0], placeholder_token_id=2))
    fields["rewards_trl_sees"] = service_reward(
        prompts=[None] * len(group), completions=[None] * len(group),
        reward=fields["reward"], mask_sample=fields["mask_sample"])
    out.append(fields)
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def converted() -> list[dict[str, list[Any]]]:
    broken = two_turns()
    broken[4]["prompt_token_ids"] = [*SYSTEM_AND_USER, 99, *OBSERVATION]  # re-tokenized history
    groups = [
        [
            result("ok", messages=two_turns(), reward=1.0),
            result("infra", messages=two_turns(), reward=0.0, mask_sample=True),
            result("failed", state=JobState.FAILED, reward=None),
            result("retokenized", messages=broken, reward=0.0),
        ],
        [result("lost", state=JobState.FAILED, reward=None), result("no-turn", messages=[], reward=0.0)],
        constrained_group(),
    ]
    return run_in_model_venv(CONVERT, groups)


def constrained_group() -> list[dict[str, Any]]:
    """A free sample, then two rollouts whose first turn was forced to call the tool: one as the
    service records it today (each turn's `decoding` summarised on the trajectory), one whose
    assistant message carries its turn's own `decoding` record."""
    second_prompt = [*SYSTEM_AND_USER, *CALL, *OBSERVATION]
    forced = record(0, SYSTEM_AND_USER, CALL, [-0.1, -0.2, -0.3, -0.4], decoding=FORCED_TOOL_CALL)
    free = record(1, second_prompt, ANSWER, [-0.5, -0.6, -0.7])
    per_turn = two_turns()
    per_turn[2]["decoding"] = FORCED_TOOL_CALL
    return [
        result("free", messages=two_turns(), reward=1.0),
        result("summarised", messages=two_turns(), reward=1.0, decoding=decoding_summary([forced, free])),
        result("per-turn", messages=per_turn, reward=0.0),
    ]


def test_the_first_prompt_is_the_prompt_and_everything_after_it_the_completion(converted: list) -> None:
    fields = converted[0]
    assert fields["prompt_ids"][0] == SYSTEM_AND_USER
    assert fields["completion_ids"][0] == [*CALL, *OBSERVATION, *ANSWER]


def test_env_mask_is_one_on_model_tokens_and_zero_on_the_environments(converted: list) -> None:
    assert converted[0]["env_mask"][0] == [1] * len(CALL) + [0] * len(OBSERVATION) + [1] * len(ANSWER)


def test_logprobs_are_the_recorded_ones_on_model_tokens_and_zero_elsewhere(converted: list) -> None:
    logprobs = converted[0]["logprobs"][0]
    assert logprobs == [-0.1, -0.2, -0.3, -0.4] + [0.0] * len(OBSERVATION) + [-0.5, -0.6, -0.7]
    assert len(logprobs) == len(converted[0]["completion_ids"][0])


def test_reward_its_components_and_the_stop_reason_come_along(converted: list) -> None:
    fields = converted[0]
    assert fields["reward"][0] == 1.0 and fields["reward_components"][0] == {"correct": 1.0}
    assert fields["stop_reason"][0] == "final_answer"
    assert fields["mask_sample"][0] is False and fields["rollout_id"][0] == "ok"


def test_rollouts_that_must_not_train_are_masked_with_the_reason(converted: list) -> None:
    fields = converted[0]
    assert fields["mask_sample"][1:] == [True, True, True]
    reasons = fields["mask_reason"]
    assert reasons[0] is None
    assert reasons[1] == "infrastructure failure: sandbox lost"
    assert reasons[2] == "rollout failed: backend unreachable"
    assert reasons[3].startswith("not token-exact: turn 1")


def test_a_masked_rollout_is_a_placeholder_on_its_groups_prompt_that_trains_no_token(converted: list) -> None:
    fields = converted[0]
    for index in (1, 2, 3):
        assert fields["prompt_ids"][index] == SYSTEM_AND_USER  # the group keeps one prompt
        assert fields["completion_ids"][index] == [2]  # the tokenizer's EOS: not counted as truncated
        assert fields["env_mask"][index] == [0] and fields["logprobs"][index] == [0.0]


def test_a_group_with_no_usable_rollout_falls_back_to_the_given_prompt(converted: list) -> None:
    fields = converted[1]
    assert fields["prompt_ids"] == [[0], [0]] and fields["mask_sample"] == [True, True]
    assert fields["mask_reason"][1] == "no model turn was recorded"


def test_trl_sees_the_services_reward_and_none_for_masked_rollouts(converted: list) -> None:
    # None is TRL's "unscorable": left out of the group baseline, advantage 0; 0.0 would count
    # the infrastructure's failure against the policy.
    assert converted[0]["rewards_trl_sees"] == [1.0, None, None, None]
    assert converted[1]["rewards_trl_sees"] == [None, None]


def test_a_rollout_with_a_turn_sampled_under_constrained_decoding_is_masked_with_the_reason(
    converted: list,
) -> None:
    fields = converted[2]
    assert fields["mask_sample"] == [False, True, True]
    assert fields["mask_reason"][0] is None  # no turn constrained: the policy's own sample trains
    summarised, per_turn = fields["mask_reason"][1:]
    assert summarised.startswith("constrained decoding: 1 of 2 model turn(s) sampled under structural_tag")
    assert per_turn.startswith("constrained decoding: model turn(s) 0 of 2 sampled under structural_tag")
    assert all(reason.endswith("not the policy's free sample") for reason in (summarised, per_turn))
    # Neither trains a token nor counts in the group's baseline, whatever reward it earned.
    assert fields["env_mask"][1:] == [[0], [0]] and fields["rewards_trl_sees"] == [1.0, None, None]


def test_a_steps_stats_say_how_many_rollouts_were_masked_for_constrained_decoding() -> None:
    stats = RolloutStats.of(constrained_group())
    assert stats.scored == 1 and stats.masked == 2
    rollout: Any = SimpleNamespace(
        last_seconds=1.0, last_guided=0, last_samples=[], last_results=[], last_teaching_groups=0
    )
    step = rollout_fields(stats, rollout, updated_version=0)
    assert step["masked"] == 2 and step["mask_reasons"] == {"constrained decoding": 2}


def test_a_step_trained_on_rollouts_of_an_older_policy_says_how_much_older_at_the_update() -> None:
    # Fresh when they finished: the service judged them 0 versions stale.
    stats = RolloutStats.of(constrained_group()).model_copy(
        update={"policy_versions": [4], "max_staleness": 0}
    )
    # Collected ahead: the previous step published version 5 before this one trained on them.
    assert staleness_at_update(stats, updated_version=5) == 1
    assert staleness_at_update(stats, updated_version=4) == 0
    assert staleness_at_update(stats.model_copy(update={"policy_versions": []}), 5) is None


def test_the_reward_function_refuses_to_run_without_the_service_fields() -> None:
    script = """
import json
from nemo_gym_prorl.integrations.trl.reward import MissingServiceFieldsError, service_reward
try:
    service_reward(prompts=["p"], completions=["c"])
except MissingServiceFieldsError as exc:
    print(json.dumps(str(exc)))
"""
    assert "rollout_func" in run_in_model_venv(script)
