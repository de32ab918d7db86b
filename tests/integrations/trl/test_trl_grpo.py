# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""TRL's GRPOTrainer trains a PEFT LoRA on CPU from service rollouts, end to end on the trainer's
side: `ServiceRollout` fetches each prompt's group over HTTP (a scripted service), the extras
reach the reward function, a failed rollout is masked, one optimizer step moves the adapter, and
the callback publishes each step's adapter as a policy version. Runs in the model venv with the
real SmolLM2-135M-Instruct (`prorl model setup`)."""

from __future__ import annotations

from typing import Any

import pytest
from trl_venv import GRPO_SCRIPT_PRELUDE, run_in_model_venv

from nemo_gym_prorl.llm.embedded import EmbeddedLayout

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]

GRPO_STEPS = (
    GRPO_SCRIPT_PRELUDE
    + """
import time
from transformers import TrainerCallback
from trl import GRPOTrainer

from nemo_gym_prorl.integrations.trl.callback import PublishPolicyCallback

G = 4

def script(job, index):
    # Member 3 of every group fails (infrastructure); members 0-2 earn 0, 1, 0.
    member = index % G
    if member == 3:
        return {"state": "failed", "error": "backend unreachable"}
    prompt = list(tok.apply_chat_template([{"role": "user", "content": job["instance"]["question"]}],
                                          add_generation_prompt=True, tokenize=True, return_dict=False))
    call = ids('<tool_call>{"name": "python", "arguments": {"code": "print(2+3)"}}</tool_call><|im_end|>')
    observation = ids("\\n<|im_start|>tool\\n5<|im_end|>\\n<|im_start|>assistant\\n")
    answer = ids(f"The answer is {4 + member}." + "<|im_end|>")
    return {"reward": float(member % 2), "reward_components": {"correct": float(member % 2)},
            "trajectory": {"stop_reason": "final_answer", "messages": [
                model_turn(prompt, call, -0.5), model_turn(prompt + call + observation, answer, -0.25)]}}

service = ScriptedRolloutService(script, token="secret")
client = ServiceClient("http://service.test", token="secret", transport=service.transport())
seen = {}
def reward(prompts, completions, **kwargs):
    seen.update({k: kwargs[k] for k in ("stop_reason", "mask_sample", "reward_components")})
    return service_reward(prompts, completions, **kwargs)

steps = []
class StepTimer(TrainerCallback):
    def on_step_begin(self, args, state, control, **kw):
        self.wall, self.cpu = time.perf_counter(), time.process_time()
    def on_step_end(self, args, state, control, **kw):
        steps.append({"wall_s": time.perf_counter() - self.wall, "cpu_s": time.process_time() - self.cpu})

rows = [{"question": "What is 2+3?", "data_source": "math"}, {"question": "What is 7-2?", "data_source": "math"}]
args = GRPOConfig(output_dir=cfg["out"], use_vllm=False, num_generations=G, per_device_train_batch_size=G,
    max_steps=cfg["steps"], learning_rate=1e-4, loss_type=cfg["loss_type"], beta=0.0, bf16=False,
    gradient_checkpointing=False, use_cpu=True, report_to="none", save_strategy="no", logging_steps=1,
    shuffle_dataset=False, seed=0)
trainer = GRPOTrainer(model=cfg["model"], reward_funcs=[reward], args=args,
    train_dataset=Dataset.from_dict({"prompt": prompt_column(rows)}), processing_class=tok,
    peft_config=LoraConfig(r=16, lora_alpha=32, target_modules="all-linear", task_type="CAUSAL_LM"),
    rollout_func=ServiceRollout(client, sampling_params={"temperature": 1.0}),
    callbacks=[PublishPolicyCallback(cfg["out"] + "/policies", client=client), StepTimer()])
trainable = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if p.requires_grad}
trainer.train()
moved = sum(not torch.equal(trainable[n], p) for n, p in trainer.model.named_parameters() if p.requires_grad)
print(json.dumps({
    "trainable_params": sum(t.numel() for t in trainable.values()), "moved_tensors": moved,
    "tensors": len(trainable), "steps": steps, "policies": service.policies,
    "groups": sorted({j["group_id"] for j in service.jobs}), "jobs": len(service.jobs),
    "seen": seen, "loss": [e["loss"] for e in trainer.state.log_history if "loss" in e],
}))
"""
)


@pytest.fixture(scope="module")
def model_dir() -> str:
    layout = EmbeddedLayout.default()
    if not layout.is_ready():
        pytest.skip(f"the embedded model is not set up under {layout.home}: run `prorl model setup`")
    return str(layout.model_dir)


def grpo(model_dir: str, out: str, *, loss_type: str, steps: int) -> dict[str, Any]:
    config = {"model": model_dir, "out": out, "loss_type": loss_type, "steps": steps}
    return run_in_model_venv(GRPO_STEPS, config, timeout_s=900)


@pytest.fixture(scope="module")
def dapo(model_dir: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return grpo(model_dir, str(tmp_path_factory.mktemp("grpo")), loss_type="dapo", steps=2)


def test_each_prompts_group_goes_to_the_service_as_one_group(dapo: dict[str, Any]) -> None:
    assert dapo["jobs"] == 8 and len(dapo["groups"]) == 2  # 2 steps x 1 prompt x 4 generations


def test_the_services_extras_reach_the_reward_function(dapo: dict[str, Any]) -> None:
    assert dapo["seen"]["stop_reason"][:3] == ["final_answer"] * 3
    assert dapo["seen"]["mask_sample"] == [False, False, False, True]
    assert dapo["seen"]["reward_components"][1] == {"correct": 1.0}


def test_an_optimizer_step_moves_the_lora_adapter(dapo: dict[str, Any]) -> None:
    assert dapo["trainable_params"] == 4_884_480  # r=16 on every linear layer of SmolLM2-135M
    assert dapo["moved_tensors"] > 0 and len(dapo["steps"]) == 2


def test_every_step_publishes_its_adapter_as_the_next_policy_version(dapo: dict[str, Any]) -> None:
    assert [p["version"] for p in dapo["policies"]] == [1, 2]
    assert all(p["adapter_path"].endswith(f"policy-v00000{p['version']}") for p in dapo["policies"])
