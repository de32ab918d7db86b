# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""examples/native_client.py and examples/prorl_process_client.py against `prorl serve` and the
embedded model (SmolLM2-135M on vLLM-CPU), run as a user runs them: separate processes."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from nemo_gym_prorl.integrations.gym.launcher import free_port
from nemo_gym_prorl.llm.embedded import VLLMServer, write_key_file
from nemo_gym_prorl.sandbox.leftovers import sandbox_dirs

pytestmark = [pytest.mark.vllm, pytest.mark.bwrap, pytest.mark.slow, pytest.mark.timeout(900)]

REPO = Path(__file__).resolve().parents[2]
PROMPT_LIMITS = ["--max-tokens", "24"]


@pytest.fixture
def service(real_vllm: VLLMServer, tmp_path: Path) -> Iterator[str]:
    """`prorl serve` in its own process, stopped (and checked stopped) after the test."""
    port = free_port()
    log = (tmp_path / "serve.log").open("w")
    assert real_vllm.api_key is not None
    key_file = tmp_path / "model.key"  # the service alone reads the model server's key
    write_key_file(key_file, real_vllm.api_key)
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "prorl"), "serve", f"server.port={port}", f"+sandbox.root_dir={tmp_path}",
         f"llm.api_key_file={key_file}",
         "tasks.math.options.agent.max_turns=2", "pipeline.init_workers=2", "pipeline.run_workers=2",
         "pipeline.eval_workers=2"],
        stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path, start_new_session=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            assert proc.poll() is None, (tmp_path / "serve.log").read_text()[-3000:]
            try:
                if httpx.get(f"{url}/v1/status", timeout=2).status_code in (200, 503):
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "prorl serve did not come up"
            time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        log.close()
    assert not sandbox_dirs(tmp_path), "the service closed every sandbox"


def example(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(REPO / "examples" / name), *args],
        capture_output=True, text=True, timeout=600, env={**os.environ},
    )  # fmt: skip


def test_native_client_streams_a_rollout_and_runs_a_dapo_batch(service: str, real_vllm: VLLMServer) -> None:
    run = example("native_client.py", "--url", service, "--backend", real_vllm.base_url, *PROMPT_LIMITS)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    rollout = re.search(r"rollout \S+: state=(\S+) reward=(\S+) turns=(\d+)", run.stdout)
    assert rollout and rollout.group(1) == "done" and int(rollout.group(3)) >= 1, run.stdout
    batch = re.search(r"batch \S+: (\d+) informative, (\d+) uniform, (\d+) failed groups", run.stdout)
    assert batch, run.stdout
    informative, uniform, failed = map(int, batch.groups())
    assert informative + uniform + failed >= 2 and failed == 0, run.stdout


def test_trainer_style_process_client(service: str, real_vllm: VLLMServer) -> None:
    address = real_vllm.base_url.removeprefix("http://").removesuffix("/v1")
    run = example("prorl_process_client.py", "--url", service, "--llm", address, *PROMPT_LIMITS)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    samples = re.findall(
        r"sample: reward=(\S+) finish=\S+ end_properly=\S+ turns=(\d+) generated_tokens=(\d+)", run.stdout
    )
    assert len(samples) == 2, run.stdout
    assert all(int(turns) >= 1 and int(tokens) > 0 for _, turns, tokens in samples)
