# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""A GRPO step none of whose groups can teach (every sample of each group scored the same) trains
nothing and publishes nothing: the program (`python -m nemo_gym_prorl.integrations.trl.grpo`, as
`prorl train` runs it) on a scripted service whose steps 1 and 3 score every rollout alike and
whose step 2 does not. The trainer's loss is computed for step 2 alone, the weights move in step 2
alone, only step 2's policy is published, and the step events and the run's end say which steps
were skipped and why. Runs in the model venv with a tiny randomly initialized Llama."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from trl_venv import run_in_model_venv

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

SCRIPT = """
import json, sys
import torch

from tests.support.tiny_llama import save_tiny_llama
from nemo_gym_prorl.integrations.trl import callback, grpo, mismatch
from nemo_gym_prorl.integrations.trl.client import ServiceClient
from nemo_gym_prorl.integrations.trl.jobs import GrpoJob
from nemo_gym_prorl.integrations.trl.rollout import prompt_column
from tests.support.scripted_rollout_service import ScriptedRolloutService, model_turn

cfg = json.load(sys.stdin)
out = cfg["out"]
save_tiny_llama(out + "/model")
with open(out + "/prompts.jsonl", "w") as handle:
    handle.write(json.dumps({"seed": 0}) + "\\n")

def script(job, index):
    # Step 1 (trainer step 0): every rollout solves the task; step 3: none does; step 2: half do.
    step = job["metadata"]["trainer_step"]
    reward = {0: 1.0, 1: float(index % 2), 2: 0.0}[step]
    trajectory = {"stop_reason": "final_answer", "messages": [model_turn([5, 6, 7], [10 + index % 4, 11, 2], -1.5)]}
    return {"reward": reward, "trajectory": trajectory}

losses = []  # each real loss computation: the step it belonged to
real_loss = mismatch.MeasuredGRPOTrainer._compute_loss
def counted(self, model, inputs):
    losses.append(int(self.state.global_step) + 1)
    return real_loss(self, model, inputs)
mismatch.MeasuredGRPOTrainer._compute_loss = counted

lora_b = []  # after each step, before its publish: the total size of the LoRA B matrices (0 at init)
publish = callback.PublishPolicyCallback.on_step_end
def weighed(self, args, state, control, model=None, **kwargs):
    lora_b.append(sum(float(p.abs().sum()) for n, p in model.named_parameters() if "lora_B" in n))
    return publish(self, args, state, control, model=model, **kwargs)
callback.PublishPolicyCallback.on_step_end = weighed

job = GrpoJob.model_validate({**cfg["job"], "model_dir": out + "/model", "prompts": out + "/prompts.jsonl",
                              "output_dir": out + "/policies"})
service = ScriptedRolloutService(script, token="secret")
client = ServiceClient(job.service_url, token="secret", transport=service.transport())
events = []
grpo.emit = lambda event, **fields: events.append({"event": event, **fields})
prompts = grpo.step_prompts(job, prompt_column(grpo.read_rows(job.prompts)))
rollout = grpo.service_rollout(job, prompts, client)
grpo.train(job, prompts, rollout, client)
print(json.dumps({"events": events, "losses": losses, "lora_b": lora_b, "published": service.policies}))
"""

JOB = {
    "service_url": "http://service.test",
    "token": "secret",
    "task": "math",
    "optimizer": {"learning_rate": 1e-2, "batch_size": 4},
    "lora": {"r": 4, "alpha": 8},
    "beta": 0.04,  # with a KL term, a step with nothing to teach would still move the weights
    "steps": 3,
    "prompts_per_step": 1,
    "num_generations": 4,
    "sampling_params": {"temperature": 1.0, "max_tokens": 8},
}


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out: Path = tmp_path_factory.mktemp("no-teach")
    return run_in_model_venv(SCRIPT, {"out": str(out), "job": JOB}, timeout_s=540)


def steps(run: dict[str, Any]) -> dict[int, dict[str, Any]]:
    return {e["step"]: e for e in run["events"] if e["event"] == "step"}


def test_a_step_whose_groups_all_scored_alike_computes_no_loss_and_moves_no_weight(
    run: dict[str, Any],
) -> None:
    assert set(run["losses"]) == {2}  # the trainer's loss ran for step 2 only
    after_1, after_2, after_3 = run["lora_b"]
    assert after_1 == 0.0  # LoRA's B starts at zero: step 1 left it there
    assert after_2 > 0.0 and after_3 == after_2  # step 2 trained; step 3 moved nothing, moments included


def test_only_a_step_that_taught_something_publishes_a_version(run: dict[str, Any]) -> None:
    assert [p["version"] for p in run["published"]] == [2]
    done = next(e for e in run["events"] if e["event"] == "done")
    assert [p["version"] for p in done["published"]] == [2]
    assert done["skipped_steps"] == [1, 3]


def test_each_skipped_step_says_why_and_carries_no_version_loss_or_mismatch(run: dict[str, Any]) -> None:
    by_step = steps(run)
    assert sorted(by_step) == [1, 2, 3]
    for number in (1, 3):
        skipped = by_step[number]
        assert skipped["skipped"] == "no group can teach: 0 of 1 groups have rewards that differ"
        assert skipped["teaching_groups"] == 0 and skipped["informative_groups"] == 0
        assert skipped["loss"] is None and skipped["publish_s"] == 0.0
        assert not {"version", "adapter_path", "mismatch"} & set(skipped)
        assert skipped["rollouts"] == 4  # the step's rollouts ran, and are reported
    trained = by_step[2]
    assert "skipped" not in trained and trained["teaching_groups"] == 1 and trained["version"] == 2
    assert isinstance(trained["loss"], float) and trained["mismatch"]["tokens"] > 0
