# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""examples/collect_rollouts.sh on the embedded model: NeMo Gym's own `ng_collect_rollouts` runs
our configs through the prorl agent, and Gym's observability sees every rollout: its health
checks judge each one healthy or unhealthy (none unobserved) and each record carries `ng_perf`."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from nemo_gym_prorl.integrations.gym.launcher import free_port
from nemo_gym_prorl.llm.embedded import VLLMServer

pytestmark = [pytest.mark.vllm, pytest.mark.bwrap, pytest.mark.slow, pytest.mark.timeout(1200)]

REPO = Path(__file__).resolve().parents[2]


def test_collect_rollouts_example_is_observed_by_gym(real_vllm: VLLMServer, tmp_path: Path) -> None:
    out = tmp_path / "out"
    env = {**os.environ, "MODEL_URL": real_vllm.base_url, "HEAD_PORT": str(free_port()), "MAX_TURNS": "2",
           "MAX_TOKENS": "48", "ROWS": "2", "REPEATS": "2"}  # fmt: skip
    run = subprocess.run(
        ["bash", str(REPO / "examples" / "collect_rollouts.sh"), str(out)],
        capture_output=True, text=True, timeout=1100, env=env,
    )  # fmt: skip
    printed = run.stdout + run.stderr
    assert run.returncode == 0, printed[-5000:]
    health = re.search(
        r"Rollout health: (\d+) checked, (\d+) healthy, (\d+) unhealthy, (\d+) unobserved", printed
    )
    assert health, printed[-5000:]
    checked, healthy, unhealthy, unobserved = map(int, health.groups())
    assert checked == 4 and unobserved == 0 and healthy + unhealthy == 4, health.group(0)

    records = [json.loads(line) for line in (out / "rollouts.jsonl").read_text().splitlines()]
    assert len(records) == 4
    for record in records:
        assert record["ng_trajectory"]["model_calls"], "the agent's model calls reached Gym"
        assert record["ng_perf"]["num_turns"] == record["num_turns"]
        assert record["ng_perf"]["token_observability_coverage"] == 1.0
    assert "turn 1:" in printed  # `prorl show` rendered them
    assert not (out / "gym" / "state.json").exists(), "prorl gym down ran"
