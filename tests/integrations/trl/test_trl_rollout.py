# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The `rollout_func` sends each prompt's group to the service's native API and returns TRL's
fields in TRL's order; bad prompts get a clear error; a rollout still running at the deadline is
masked and cancelled. Runs in the model venv against a scripted service (httpx transport)."""

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

def script(job, index):
    base = 100 * (1 + int(job["instance"]["seed"]))  # each task has its own prompt
    if index == 1:
        return {"state": "done", "reward": 0.0, "mask_sample": True, "report": {"detail": "sandbox lost"},
                "trajectory": {"messages": [model_turn([base], [base + 1])]}}
    return {"reward": float(index), "trajectory": {"stop_reason": "final_answer",
            "messages": [model_turn([base, base + 1], [base + 2, index])]}}

service = ScriptedRolloutService(script, token="t")
rollout = ServiceRollout(ServiceClient("http://svc.test", token="t", transport=service.transport()),
                         task="math", sampling_params={"temperature": 0.7}, timeout_s=1)
trainer = SimpleNamespace(num_generations=2, num_generations_eval=1, model=SimpleNamespace(training=True),
                          processing_class=SimpleNamespace(eos_token_id=2), state=SimpleNamespace(global_step=7))
prompts = [p for p in prompt_column([{"seed": 0}, {"seed": 1}]) for _ in range(2)]
out = {"fields": rollout(prompts, trainer), "jobs": service.jobs}

errors = {}
for name, bad in {"not_json": ["hello", "hello"], "not_repeated": prompts[1:3], "odd": prompts[:3]}.items():
    try:
        rollout(bad, trainer)
    except ValueError as exc:
        errors[name] = str(exc)
out["errors"] = errors

service.unfinished = {"job-4"}
late = rollout(prompts[:2], trainer)
out["late"] = {"mask_reason": late["mask_reason"], "cancelled": service.cancelled}
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def outcome() -> dict[str, Any]:
    return run_in_model_venv(SCRIPT)


def test_each_group_is_num_generations_jobs_of_one_instance_under_one_group_id(
    outcome: dict[str, Any],
) -> None:
    jobs = outcome["jobs"][:4]
    assert [j["instance"] for j in jobs] == [{"seed": 0}, {"seed": 0}, {"seed": 1}, {"seed": 1}]
    assert jobs[0]["group_id"] == jobs[1]["group_id"] != jobs[2]["group_id"] == jobs[3]["group_id"]
    assert all(j["task"] == "math" and j["sampling_params"] == {"temperature": 0.7} for j in jobs)
    assert all(j["metadata"] == {"trainer_step": 7} for j in jobs)


def test_the_fields_come_back_in_trls_order(outcome: dict[str, Any]) -> None:
    fields = outcome["fields"]
    assert fields["prompt_ids"] == [[100, 101], [100, 101], [200, 201], [200, 201]]
    assert fields["completion_ids"] == [[102, 0], [2], [202, 2], [202, 3]]
    assert fields["env_mask"] == [[1, 1], [0], [1, 1], [1, 1]]
    assert fields["reward"] == [0.0, None, 2.0, 3.0]
    assert fields["mask_reason"][1] == "infrastructure failure: sandbox lost"


def test_prompts_that_are_not_task_instances_or_not_grouped_get_a_clear_error(
    outcome: dict[str, Any],
) -> None:
    errors = outcome["errors"]
    assert "task instance as a JSON object" in errors["not_json"]
    assert "not 2 repeats of one prompt" in errors["not_repeated"]
    assert "do not split into groups of num_generations=2" in errors["odd"]


def test_a_rollout_still_running_at_the_deadline_is_masked_and_cancelled(outcome: dict[str, Any]) -> None:
    late = outcome["late"]
    assert late["mask_reason"][0].startswith("rollout missing: not finished within 1s")
    assert late["mask_reason"][1] is None and late["cancelled"] == ["job-4"]
