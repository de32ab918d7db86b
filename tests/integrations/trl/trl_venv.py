# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Run code in the embedded model venv (Python 3.11, TRL, PEFT), where the TRL integration runs.

The tests themselves run in the project's venv; each sends a script and a JSON payload to the
model venv's interpreter and asserts on the JSON it prints last. Tests skip, saying why, when
that venv is missing or predates the lock that added TRL.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from nemo_gym_prorl.llm.embedded import EmbeddedLayout

REPO = Path(__file__).resolve().parents[3]
TRL_PACKAGE = REPO / "nemo_gym_prorl" / "integrations" / "trl"
HIDE_VLLM = "from nemo_gym_prorl.integrations.trl.no_vllm import hide_vllm; hide_vllm()\n"
# How a GRPO script against a scripted service starts: its config from stdin (`cfg`), torch seeded,
# the model's tokenizer (`tok`, `ids(text)`), and the TRL integration's client, rollout and reward.
GRPO_SCRIPT_PRELUDE = """
import json, sys
import torch
from datasets import Dataset
from peft import LoraConfig
from transformers import AutoTokenizer
from trl import GRPOConfig

from nemo_gym_prorl.integrations.trl.client import ServiceClient
from nemo_gym_prorl.integrations.trl.reward import service_reward
from nemo_gym_prorl.integrations.trl.rollout import ServiceRollout, prompt_column
from tests.support.scripted_rollout_service import ScriptedRolloutService, model_turn

cfg = json.load(sys.stdin)
torch.manual_seed(0)
tok = AutoTokenizer.from_pretrained(cfg["model"])
ids = lambda text: tok(text, add_special_tokens=False)["input_ids"]
"""


def model_python() -> Path:
    """The model venv's interpreter; skips the test when there is none."""
    layout = EmbeddedLayout.default()
    if not layout.python.exists():
        pytest.skip(f"the model venv is not built under {layout.home}: run `prorl model setup`")
    return layout.python


def trl_python() -> Path:
    """The model venv's interpreter, if that venv holds TRL; skips the test otherwise."""
    python = model_python()
    venv = python.parent.parent
    if not glob.glob(str(venv / "lib" / "python3*" / "site-packages" / "trl-*.dist-info")):
        pytest.skip(f"the model venv {venv} has no TRL (built from an older lock): rerun `prorl model setup`")
    return python


def run_in_model_venv(script: str, payload: Any = None, *, timeout_s: float = 300) -> Any:
    """Run `script` with the payload as JSON on stdin; return the JSON its last stdout line holds.
    It runs as the trainer programs do: with no vLLM in the process (`hide_vllm`)."""
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "HF_HUB_OFFLINE": "1",
        "TRL_EXPERIMENTAL_SILENCE": "1",
        "TQDM_DISABLE": "1",
        "PYTHONWARNINGS": "ignore",
    }
    proc = subprocess.run(
        [str(trl_python()), "-c", HIDE_VLLM + script],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout_s,
        check=False,
        cwd=REPO,
    )
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])
