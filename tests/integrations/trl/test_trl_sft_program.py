# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The SFT program (`python -m nemo_gym_prorl.integrations.trl.sft JOB.json`) as `prorl train`
runs it: one `step` event per optimizer step with that step's own loss (the last step's
included), then the adapter; it trains where TRL and accelerate put it (here, with no GPU, the
CPU) unless the job says `cpu`. Runs in the model venv with a tiny randomly initialized Llama and
a word-level tokenizer built on the spot (no download)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from trl_venv import run_in_model_venv

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

SCRIPT = """
import json, os, subprocess, sys
import torch

from tests.support.tiny_llama import save_tiny_llama
from nemo_gym_prorl.integrations.trl import sft
from nemo_gym_prorl.integrations.trl.jobs import EVENT_PREFIX, SftJob

out = json.load(sys.stdin)["out"]
save_tiny_llama(out + "/model")
with open(out + "/demos.jsonl", "w") as handle:
    for k in range(4):  # a tool call, the tool's answer (environment), the final answer
        handle.write(json.dumps({"prompt_ids": [5, 6, 7 + k], "completion_ids": [10 + k, 11, 2, 20, 21, 12 + k, 2],
                                 "env_mask": [1, 1, 1, 0, 0, 1, 1]}) + "\\n")
job = SftJob(model_dir=out + "/model", demonstrations=out + "/demos.jsonl", output_dir=out + "/policies",
             optimizer={"learning_rate": 1e-2, "batch_size": 2}, lora={"r": 4, "alpha": 8}, epochs=2,
             publish_as="weights")
with open(out + "/job.json", "w") as handle:
    handle.write(job.model_dump_json())
proc = subprocess.run([sys.executable, "-m", "nemo_gym_prorl.integrations.trl.sft", out + "/job.json"],
                      capture_output=True, text=True, env=os.environ, check=False)
assert proc.returncode == 0, proc.stderr[-3000:]
events = [json.loads(line[len(EVENT_PREFIX):]) for line in proc.stdout.splitlines() if line.startswith(EVENT_PREFIX)]
default, cpu = sft.sft_config(job), sft.sft_config(job.model_copy(update={"device": "cpu"}))
# the trainer's own merge against the merge program's, from the adapter it saved
from safetensors.torch import load_file
from nemo_gym_prorl.integrations.trl.jobs import MergeJob
from nemo_gym_prorl.integrations.trl.merge import merge
done = events[-1]
reference = merge(MergeJob(model_dir=out + "/model", adapter=done["adapter_path"], output_dir=out + "/reference"))
mine, theirs = load_file(done["weights_path"] + "/model.safetensors"), load_file(str(reference / "model.safetensors"))
base = load_file(out + "/model/model.safetensors")
print(json.dumps({"events": events, "use_cpu": default.use_cpu, "device": str(default.device),
                  "cpu_job_use_cpu": cpu.use_cpu, "cuda_available": torch.cuda.is_available(),
                  "same_names": sorted(mine) == sorted(theirs),
                  "max_diff": max((mine[k] - theirs[k]).abs().max().item() for k in theirs),
                  "changed_from_base": max((mine[k] - base[k]).abs().max().item() for k in base),
                  "tokenizer_copied": os.path.isfile(done["weights_path"] + "/tokenizer.json")}))
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out: Path = tmp_path_factory.mktemp("sft-program")
    return run_in_model_venv(SCRIPT, {"out": str(out)}, timeout_s=540)


def test_every_optimizer_step_is_reported_with_its_own_loss_then_the_adapter(run: dict[str, Any]) -> None:
    steps = [e for e in run["events"] if e["event"] == "step"]
    assert [s["step"] for s in steps] == [1, 2, 3, 4]  # 4 demonstrations, batches of 2, 2 epochs
    assert all(s["of"] == 4 and isinstance(s["loss"], float) for s in steps)
    done = run["events"][-1]
    assert done["event"] == "done" and done["adapter_path"].endswith("policy-v000001")
    assert done["model_tokens"] == 4 * 5


def test_with_publish_as_weights_the_trainer_writes_the_adapter_merged_as_the_merge_program_would(
    run: dict[str, Any],
) -> None:
    done = run["events"][-1]
    assert done["weights_path"].endswith("weights-v000001")
    assert run["same_names"] and run["max_diff"] == 0.0
    assert run["changed_from_base"] > 0.0  # the adapter trained, so merging it changed the weights
    assert run["tokenizer_copied"]  # a checkpoint that serves on its own


def test_the_sft_trainer_runs_where_trl_puts_it_and_on_the_cpu_when_the_job_says_so(
    run: dict[str, Any],
) -> None:
    assert run["use_cpu"] is False and run["cpu_job_use_cpu"] is True
    assert run["device"].startswith("cuda" if run["cuda_available"] else "cpu")
