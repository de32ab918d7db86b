# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The GRPO program (`python -m nemo_gym_prorl.integrations.trl.grpo JOB.json`) as `prorl train`
runs it, on a scripted service: every step's `step` event carries the loss the trainer logged for
that step, the last step's included; the trainer computes its log-probs at the temperature the
rollouts were sampled at; a rollout sampled under constrained decoding is masked and the step
says so; and the trainer runs where TRL and accelerate put it (here, with no GPU, the CPU) unless
the job says `cpu`. Runs in the model venv with a tiny randomly initialized Llama and a word-level
tokenizer built on the spot (no download)."""

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
from nemo_gym_prorl.integrations.trl import grpo
from nemo_gym_prorl.integrations.trl.client import ServiceClient
from nemo_gym_prorl.integrations.trl.jobs import GrpoJob
from nemo_gym_prorl.integrations.trl.rollout import prompt_column
from tests.support.scripted_rollout_service import ScriptedRolloutService, model_turn

cfg = json.load(sys.stdin)
out = cfg["out"]
save_tiny_llama(out + "/model")
with open(out + "/prompts.jsonl", "w") as handle:
    handle.write(json.dumps({"seed": 0}) + "\\n" + json.dumps({"seed": 1}) + "\\n")

FORCED = {"kind": "structural_tag", "mode": "tool", "tool_format": "hermes", "tools": ["ipython"],
          "answer_pattern": None, "submit_pattern": None, "max_string_length": 2048}

def script(job, index):
    # Members 0-2 of a group earn 0, 1, 0; member 3 was forced to call the tool on its first turn
    # (what the service records: the trajectory's summary of its turns' decoding).
    member = index % 4
    seed = int(job["instance"]["seed"])
    trajectory = {"stop_reason": "final_answer", "messages": [
        model_turn([5 + seed, 6, 7], [10 + member, 11 + seed, 2], -1.5)]}
    if member == 3:
        trajectory["decoding"] = {"constrained": True, "kind": "structural_tag", "constrained_turns": 1,
                                  "unconstrained_turns": 0, "turn_modes": {"tool": 1}}
    return {"reward": float(member % 2), "trajectory": trajectory}

job = GrpoJob.model_validate({**cfg["job"], "model_dir": out + "/model", "prompts": out + "/prompts.jsonl",
                              "output_dir": out + "/policies"})
service = ScriptedRolloutService(script, token="secret")
client = ServiceClient(job.service_url, token="secret", transport=service.transport())
events = []
grpo.emit = lambda event, **fields: events.append({"event": event, **fields})
prompts = grpo.step_prompts(job, prompt_column(grpo.read_rows(job.prompts)))
rollout = grpo.service_rollout(job, prompts, client)
trainer = grpo.train(job, prompts, rollout, client)
print(json.dumps({
    "events": events,
    "logged": [{"step": entry["step"], "loss": entry["loss"]} for entry in trainer.state.log_history
               if "loss" in entry],
    "sampled_with": [j["sampling_params"] for j in service.jobs],
    "trainer_temperature": trainer.temperature,
    "config_temperature": trainer.args.temperature,
    "use_cpu": trainer.args.use_cpu,
    "device": str(trainer.args.device),
    "cuda_available": torch.cuda.is_available(),
    "model_device": str(next(trainer.model.parameters()).device),
    "cpu_job_use_cpu": grpo.grpo_config(job.model_copy(update={"device": "cpu"})).use_cpu,
}))
"""

JOB = {
    "service_url": "http://service.test",
    "token": "secret",
    "task": "math",
    "optimizer": {"learning_rate": 1e-2, "batch_size": 4},
    "lora": {"r": 4, "alpha": 8},
    "steps": 3,
    "prompts_per_step": 1,
    "num_generations": 4,
    "sampling_params": {"temperature": 0.6, "max_tokens": 8},
}


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out: Path = tmp_path_factory.mktemp("grpo-program")
    return run_in_model_venv(SCRIPT, {"out": str(out), "job": JOB}, timeout_s=540)


def steps(run: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for e in run["events"] if e["event"] == "step"]


def test_every_step_event_carries_the_loss_the_trainer_logged_for_that_step(run: dict[str, Any]) -> None:
    assert [s["step"] for s in steps(run)] == [1, 2, 3]
    assert [s["loss"] for s in steps(run)] == [entry["loss"] for entry in run["logged"]]
    assert [entry["step"] for entry in run["logged"]] == [1, 2, 3]
    assert all(isinstance(s["loss"], float) for s in steps(run))  # the first and the last step's too


def test_each_step_event_comes_after_its_publish_and_before_the_end(run: dict[str, Any]) -> None:
    assert [e["event"] for e in run["events"]] == ["step", "step", "step", "done"]
    assert [s["version"] for s in steps(run)] == [1, 2, 3]
    assert all(s["adapter_path"].endswith(f"policy-v00000{s['version']}") for s in steps(run))


def test_the_trainer_computes_log_probs_at_the_temperature_the_rollouts_were_sampled_at(
    run: dict[str, Any],
) -> None:
    assert run["sampled_with"] == [{"temperature": 0.6, "top_p": 1.0, "max_tokens": 8}] * 12
    assert run["trainer_temperature"] == run["config_temperature"] == 0.6


def test_a_rollout_sampled_under_constrained_decoding_is_masked_and_the_step_says_why(
    run: dict[str, Any],
) -> None:
    for step in steps(run):
        assert step["rollouts"] == 4 and step["masked"] == 1
        assert step["mask_reasons"] == {"constrained decoding": 1}
        assert step["reward"] == round(1 / 3, 4)  # the three free samples only


def test_the_trainer_runs_where_trl_puts_it_and_on_the_cpu_when_the_job_says_so(run: dict[str, Any]) -> None:
    assert run["use_cpu"] is False and run["cpu_job_use_cpu"] is True
    expected = "cuda" if run["cuda_available"] else "cpu"
    assert run["device"].startswith(expected) and run["model_device"].startswith(expected)
