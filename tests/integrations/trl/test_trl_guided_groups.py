# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""A group guided by a program-written demonstration (off-policy guidance of GRPO's rehearsal):
the service runs one rollout fewer for it, the demonstration is its last member with its own ids
and mask, no log-probs and its reward, and a group whose rollouts all fail still teaches: one
real TRL step raises the demonstration's answer over the policy's failed one, while the trainer-vs-rollout mismatch is measured on the policy's own tokens only. Runs in
the model venv with the real SmolLM2-135M-Instruct (`prorl model setup`) and a scripted service."""

from __future__ import annotations

from typing import Any

import pytest
from trl_venv import GRPO_SCRIPT_PRELUDE, run_in_model_venv

from nemo_gym_prorl.llm.embedded import EmbeddedLayout

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

GUIDED_STEP = (
    GRPO_SCRIPT_PRELUDE
    + """
from nemo_gym_prorl.integrations.trl.fields import guide_sample
from nemo_gym_prorl.integrations.trl.mismatch import MeasuredGRPOTrainer

G = 4
question = "What is 2+3?"
prompt = list(tok.apply_chat_template([{"role": "user", "content": question}],
                                      add_generation_prompt=True, tokenize=True, return_dict=False))
call = ids('<tool_call>{"name": "python", "arguments": {"code": "print(2+3)"}}</tool_call><|im_end|>')
observation = ids("\\n<|im_start|>tool\\n5<|im_end|>\\n<|im_start|>assistant\\n")
wrong, right = ids("The answer is \\\\boxed{4}.<|im_end|>"), ids("The answer is \\\\boxed{5}.<|im_end|>")

def script(job, index):
    # Every rollout of the policy answers 4: the group has no reward of its own.
    return {"reward": 0.0, "trajectory": {"stop_reason": "final_answer", "messages": [
        model_turn(prompt, call, -0.5), model_turn(prompt + call + observation, wrong, -0.25)]}}

guide = guide_sample({
    "origin": "program-written demonstration", "task_id": "t-guided", "reward": 1.0,
    "reward_components": {"correct": 1.0}, "prompt_ids": prompt,
    "completion_ids": call + observation + right,
    "env_mask": [1] * len(call) + [0] * len(observation) + [1] * len(right)})
service = ScriptedRolloutService(script, token="secret")
client = ServiceClient("http://service.test", token="secret", transport=service.transport())
rollout = ServiceRollout(client, sampling_params={"temperature": 1.0}, guides={"t-guided": guide})
rows = [{"task_id": "t-guided", "question": question, "data_source": "math"}]
args = GRPOConfig(output_dir=cfg["out"], use_vllm=False, num_generations=G, per_device_train_batch_size=G,
    max_steps=1, learning_rate=1e-4, loss_type="dapo", beta=0.0, bf16=False, gradient_checkpointing=False,
    use_cpu=True, report_to="none", save_strategy="no", logging_steps=1, shuffle_dataset=False, seed=0)
trainer = MeasuredGRPOTrainer(model=cfg["model"], reward_funcs=[service_reward], args=args,
    train_dataset=Dataset.from_dict({"prompt": prompt_column(rows)}), processing_class=tok,
    peft_config=LoraConfig(r=16, lora_alpha=32, target_modules="all-linear", task_type="CAUSAL_LM"),
    rollout_func=rollout)

def answer_logprob(answer):
    context = prompt + call + observation
    tokens = torch.tensor([context + answer])
    with torch.no_grad():
        logits = trainer.model(input_ids=tokens).logits[0, len(context) - 1 : -1].float()
    return float(torch.log_softmax(logits, -1).gather(1, torch.tensor(answer)[:, None]).sum())

before = {"right": answer_logprob(right), "wrong": answer_logprob(wrong)}
trainer.train()
after = {"right": answer_logprob(right), "wrong": answer_logprob(wrong)}
samples = [s.model_dump() for s in rollout.last_samples]
print(json.dumps({
    "jobs": len(service.jobs), "guided": rollout.last_guided, "samples": samples,
    "before": before, "after": after, "mismatch": trainer.take_mismatch().model_dump(),
    "policy_tokens": sum(sum(s["env_mask"]) for s in samples if s["origin"] is None),
}))
"""
)


@pytest.fixture(scope="module")
def guided(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    layout = EmbeddedLayout.default()
    if not layout.is_ready():
        pytest.skip(f"the embedded model is not set up under {layout.home}: run `prorl model setup`")
    config = {"model": str(layout.model_dir), "out": str(tmp_path_factory.mktemp("guided"))}
    return run_in_model_venv(GUIDED_STEP, config, timeout_s=600)


def test_a_guided_group_runs_one_rollout_fewer_and_ends_with_its_demonstration(
    guided: dict[str, Any],
) -> None:
    assert guided["jobs"] == 3 and guided["guided"] == 1
    samples = guided["samples"]
    assert [s["origin"] for s in samples] == [None, None, None, "program-written demonstration"]
    demonstration = samples[-1]
    assert demonstration["reward"] == 1.0 and demonstration["rollout_id"] == "demonstration-t-guided"
    assert demonstration["logprobs"] == [None] * len(demonstration["completion_ids"])
    assert all(s["prompt_ids"] == demonstration["prompt_ids"] for s in samples)
    assert [s["reward"] for s in samples[:3]] == [0.0, 0.0, 0.0]


def test_a_group_the_policy_fails_entirely_still_teaches_the_demonstrated_answer(
    guided: dict[str, Any],
) -> None:
    # The three failed samples and the demonstration share the call and the answer's words: the
    # step moves the answer the demonstration wrote above the one the policy sampled.
    before, after = guided["before"], guided["after"]
    assert after["right"] - after["wrong"] > before["right"] - before["wrong"]


def test_the_mismatch_is_measured_on_the_policys_own_tokens_only(guided: dict[str, Any]) -> None:
    mismatch = guided["mismatch"]
    assert mismatch["tokens"] == guided["policy_tokens"]
    assert mismatch["mean_abs_diff"] == mismatch["mean_abs_diff"]  # not NaN: no demonstration token counted
