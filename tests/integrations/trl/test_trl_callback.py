# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The trainer callback saves the adapter every k optimizer steps to a versioned directory and
publishes it: through a given hook, or by default as `POST /v1/policy {"version", "adapter_path"}`,
or as full weights (the adapter merged) with `{"version", "weights_path"}`. A refused publish
stops training with a clear error and keeps the saved adapter. Runs in the model venv with a tiny
randomly initialized Llama wrapped in a PEFT LoRA (no download)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from trl_venv import run_in_model_venv

SCRIPT = """
import json, os, sys
from types import SimpleNamespace
import torch
from peft import LoraConfig, get_peft_model
from transformers import LlamaConfig, LlamaForCausalLM

from nemo_gym_prorl.integrations.trl.callback import PublishPolicyCallback, PublishError
from nemo_gym_prorl.integrations.trl.client import ServiceClient
from tests.support.scripted_rollout_service import ScriptedRolloutService

out = json.load(sys.stdin)["out"]
tiny = LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                   num_attention_heads=2, num_key_value_heads=1)
torch.manual_seed(0)
LlamaForCausalLM(tiny).save_pretrained(out + "/base")
model = get_peft_model(LlamaForCausalLM.from_pretrained(out + "/base"), LoraConfig(r=4, target_modules="all-linear"))
for name, param in model.named_parameters():  # a trained adapter: B is no longer zero
    if "lora_B" in name:
        torch.nn.init.normal_(param, std=0.5)

def step(callback, number, main=True):
    state = SimpleNamespace(global_step=number, is_world_process_zero=main)
    callback.on_step_end(None, state, None, model=model)

hooked = []
every_other = PublishPolicyCallback(out + "/hook", publish=lambda path, v: hooked.append([str(path), v]),
                                     every_steps=2)
for number in range(1, 6):
    step(every_other, number)
step(every_other, 6, main=False)  # other ranks never save or publish

service = ScriptedRolloutService(script=None, token="secret")
client = ServiceClient("http://service.test", token="secret", transport=service.transport())
step(PublishPolicyCallback(out + "/http", client=client), 1)

service.policy_status = 409
refused = None
try:
    step(PublishPolicyCallback(out + "/http", client=client), 2)
except PublishError as exc:
    refused = str(exc)

service.policy_status = 200
weights = PublishPolicyCallback(out + "/weights", client=client, form="weights", model_dir=out + "/base")
for number in (1, 2):
    step(weights, number)
ids = torch.tensor([[1, 5, 9, 13, 2]])
with torch.no_grad():
    served = LlamaForCausalLM.from_pretrained(out + "/weights/weights-v000002")(ids).logits
    trained = model(ids).logits
weights_check = {"max_logit_difference": (served - trained).abs().max().item()}
with model.disable_adapter(), torch.no_grad():
    weights_check["adapter_changes_logits"] = (trained - model(ids).logits).abs().max().item()

def listing(root):
    return {name: sorted(os.listdir(os.path.join(root, name))) for name in sorted(os.listdir(root))}
print(json.dumps({"hooked": hooked, "hook_dirs": listing(out + "/hook"), "http_dirs": listing(out + "/http"),
                  "weights_dirs": listing(out + "/weights"), "posted": service.policies, "refused": refused,
                  "weights_check": weights_check}))
"""


@pytest.fixture(scope="module")
def outcome(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    out = tmp_path_factory.mktemp("policies")
    return out, run_in_model_venv(SCRIPT, {"out": str(out)})


ADAPTER_FILES = ["README.md", "adapter_config.json", "adapter_model.safetensors"]


def test_every_kth_step_is_saved_to_its_versioned_directory_and_handed_to_the_hook(
    outcome: tuple[Path, dict[str, Any]],
) -> None:
    out, result = outcome
    assert result["hooked"] == [[str(out / "hook" / f"policy-v00000{v}"), v] for v in (2, 4)]
    # a PEFT adapter only (what vLLM's load_lora_adapter reads), nothing half-written left behind
    assert result["hook_dirs"] == {"policy-v000002": ADAPTER_FILES, "policy-v000004": ADAPTER_FILES}


def test_the_default_publish_posts_the_version_and_the_absolute_adapter_path(
    outcome: tuple[Path, dict[str, Any]],
) -> None:
    out, result = outcome
    assert result["posted"][0] == {"version": 1, "adapter_path": str(out / "http" / "policy-v000001")}


def test_a_refused_publish_stops_training_with_the_reason_and_keeps_the_adapter(
    outcome: tuple[Path, dict[str, Any]],
) -> None:
    _, result = outcome
    assert "policy v2" in result["refused"] and "backend refused the adapter" in result["refused"]
    assert result["http_dirs"]["policy-v000002"] == ADAPTER_FILES


def test_published_as_weights_each_step_is_the_adapter_merged_and_only_the_served_checkpoint_is_kept(
    outcome: tuple[Path, dict[str, Any]],
) -> None:
    out, result = outcome
    assert result["posted"][-2:] == [
        {"version": v, "weights_path": str(out / "weights" / f"weights-v00000{v}")} for v in (1, 2)
    ]
    dirs = result["weights_dirs"]
    assert sorted(dirs) == ["policy-v000001", "policy-v000002", "weights-v000002"]  # every adapter kept
    assert "model.safetensors" in dirs["weights-v000002"] and "config.json" in dirs["weights-v000002"]
    check = result["weights_check"]
    # the checkpoint computes what the trained model computes, and the adapter does change it
    assert check["adapter_changes_logits"] > 1e-3
    assert check["max_logit_difference"] < 1e-5
