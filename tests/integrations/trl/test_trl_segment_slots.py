# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""With sample slots, every token segment of a harness rollout reaches TRL as a sample of its own
with the rollout's reward; empty slots are placeholders; a rollout with more segments than slots
is masked with that reason. TRL's group of `num_generations` samples is then
`num_generations / slots` rollouts. Runs in the model venv against a scripted service."""

from __future__ import annotations

from typing import Any

import pytest
from trl_venv import run_in_model_venv

SCRIPT = """
import json, sys
from types import SimpleNamespace
from nemo_gym_prorl.integrations.trl.client import ServiceClient
from nemo_gym_prorl.integrations.trl.rollout import ServiceRollout, prompt_column
from tests.support.scripted_rollout_service import ScriptedRolloutService, model_turn

def turn(prompt, generated):
    return {"prompt_token_ids": prompt, "generation_token_ids": generated,
            "generation_log_probs": [-0.5] * len(generated)}

# Segment 0: a reply the harness dropped; segment 1: the conversation it finished with (two calls).
DROPPED = [turn([1, 2], [3, 4])]
FINISHED = [turn([1, 2, 9], [5, 6]), turn([1, 2, 9, 5, 6, 7], [8])]

def script(job, index):
    segments = {0: [DROPPED, FINISHED], 1: [FINISHED], 2: [DROPPED, DROPPED, FINISHED]}[index % 3]
    last = segments[-1][-1]
    return {"reward": float(index % 2), "trajectory": {
        "stop_reason": "submitted",
        "messages": [model_turn(last["prompt_token_ids"], last["generation_token_ids"])],
        "harness": {"name": "mini_swe_agent", "token_segments": segments}}}

service = ScriptedRolloutService(script, token="t")
rollout = ServiceRollout(ServiceClient("http://svc.test", token="t", transport=service.transport()),
                         task="math_harness", slots=2, timeout_s=5)
trainer = SimpleNamespace(num_generations=6, num_generations_eval=6, model=SimpleNamespace(training=True),
                          processing_class=SimpleNamespace(eos_token_id=0), state=SimpleNamespace(global_step=0))
prompts = [p for p in prompt_column([{"seed": 0}]) for _ in range(6)]
fields = rollout(prompts, trainer)
errors = []
try:
    ServiceRollout(ServiceClient("http://svc.test", token="t", transport=service.transport()), slots=4)(
        prompts, trainer)
except ValueError as exc:
    errors.append(str(exc))
print(json.dumps({"fields": fields, "jobs": len(service.jobs), "errors": errors}))
"""


@pytest.fixture(scope="module")
def outcome() -> dict[str, Any]:
    return run_in_model_venv(SCRIPT)


def test_a_group_of_six_samples_with_two_slots_runs_three_rollouts(outcome: dict[str, Any]) -> None:
    assert outcome["jobs"] == 3
    assert len(outcome["fields"]["prompt_ids"]) == 6


def test_each_segment_is_a_sample_with_the_rollouts_reward(outcome: dict[str, Any]) -> None:
    fields = outcome["fields"]
    # Rollout 0: the dropped reply, then the finished conversation as one token sequence.
    assert fields["prompt_ids"][0:2] == [[1, 2], [1, 2, 9]]
    assert fields["completion_ids"][0:2] == [[3, 4], [5, 6, 7, 8]]
    assert fields["env_mask"][0:2] == [[1, 1], [1, 1, 0, 1]]
    assert fields["logprobs"][1] == [-0.5, -0.5, 0.0, -0.5]
    assert fields["reward"][0:2] == [0.0, 0.0] and fields["rollout_id"][0] == fields["rollout_id"][1]


def test_an_unused_slot_is_a_placeholder_that_trains_nothing(outcome: dict[str, Any]) -> None:
    fields = outcome["fields"]
    # Rollout 1 had one segment: its second slot is empty.
    assert fields["reward"][2:4] == [1.0, None]
    assert fields["mask_sample"][2:4] == [False, True] and fields["env_mask"][3] == [0]
    assert fields["mask_reason"][3] == "an empty slot"


def test_a_rollout_with_more_segments_than_slots_is_masked_whole_with_the_reason(
    outcome: dict[str, Any],
) -> None:
    fields = outcome["fields"]
    assert fields["mask_sample"][4:6] == [True, True] and fields["reward"][4:6] == [None, None]
    assert fields["mask_reason"][4] == "3 token segments, 2 sample slots per rollout"


def test_a_group_that_does_not_split_into_slot_runs_is_refused(outcome: dict[str, Any]) -> None:
    assert outcome["errors"] and "does not split into runs of 4 slots" in outcome["errors"][0]
