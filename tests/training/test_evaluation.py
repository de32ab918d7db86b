# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""A held-out evaluation masks rollouts by the trainer's one rule (`mask_reason`): the rewards it
pairs across phases and the statistics it prints beside them count the same rollouts. Measured,
it adds a greedy sample and pass@k on the tasks asked for, paired task by task."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from support.scripted_rollout_service import model_turn

from nemo_gym_prorl.pipeline.job import JobResult, JobState
from nemo_gym_prorl.training.evaluation import MeasureSettings, evaluate, measure


def result(job_id: str, **fields: Any) -> JobResult:
    base: dict[str, Any] = {
        "id": job_id,
        "task": "math",
        "state": JobState.DONE,
        "submitted_at": 0.0,
        "reward": 1.0,
        "trajectory": {"messages": [model_turn([1, 2], [3, 4])], "stop_reason": "final_answer"},
    }
    return JobResult.model_validate({**base, **fields})


class Client:
    """What `evaluate` asks of the service client: its policy, then the jobs run."""

    def __init__(self, results: list[JobResult]) -> None:
        self.results = results
        self.jobs: list[dict[str, Any]] = []

    async def policy(self) -> Any:
        return SimpleNamespace(served=SimpleNamespace(current=None))

    async def run(self, jobs: list[dict[str, Any]], *, timeout_s: float) -> list[JobResult]:
        assert len(jobs) == len(self.results)
        self.jobs = jobs
        return self.results


async def test_the_rewards_paired_and_the_statistics_printed_mask_the_same_rollouts() -> None:
    results = [
        result("scored"),
        result("wrong", reward=0.0),
        # The service's report flags an infrastructure failure the result's own field does not.
        result("infra", report={"mask_sample": True, "detail": "sandbox lost"}),
        result("no-turn", trajectory={"messages": [], "stop_reason": "context_length"}),
        result("failed", state=JobState.FAILED, reward=None, trajectory=None, error="backend unreachable"),
    ]
    evaluation = await evaluate(
        Client(results),  # type: ignore[arg-type]
        [{"task_id": str(i)} for i in range(len(results))],
        ["f"] * len(results),
        phase="sft",
        sampling={"temperature": 1.0},
        timeout_s=60,
    )
    assert evaluation.rewards == [1.0, 0.0, None, None, None]
    assert evaluation.stats.scored == 2 and evaluation.stats.masked == 3
    assert evaluation.stats.mean_reward == 0.5


async def test_measuring_adds_a_greedy_sample_and_pass_at_k_on_the_chosen_families_only() -> None:
    rows = [{"task_id": str(i)} for i in range(3)]
    first = await evaluate(
        Client([result("a", reward=0.0), result("b", reward=0.0), result("c", reward=1.0)]),  # type: ignore[arg-type]
        rows,
        ["gcd", "chain_sum", "chain_sum"],
        phase="grpo",
        sampling={"temperature": 1.0, "max_tokens": 64},
        timeout_s=60,
    )
    # Per chain_sum task: greedy, then two more samples (k = 3 with the evaluation's own).
    client = Client(
        [
            result("1g", reward=1.0), result("1s1", reward=0.0), result("1s2", reward=1.0),
            result("2g", reward=0.0), result("2s1", report={"mask_sample": True}), result("2s2", reward=0.0),
        ]
    )  # fmt: skip
    await measure(
        client,  # type: ignore[arg-type]
        rows,
        first,
        {"chain_sum"},
        MeasureSettings(k=3),
        sampling={"temperature": 1.0, "max_tokens": 64},
        timeout_s=60,
    )
    assert [j["instance"]["task_id"] for j in client.jobs] == ["1"] * 3 + ["2"] * 3
    assert client.jobs[0]["sampling_params"] == {"temperature": 0.0, "top_p": 1.0, "max_tokens": 64}
    assert client.jobs[1]["sampling_params"]["temperature"] == 1.0
    assert first.measured_families == ["chain_sum"] and first.pass_k == 3
    assert first.greedy == [1.0, 0.0]
    # Task 1: its first sample failed, a later one passed; task 2: its first passed, the masked one is left out.
    assert first.pass_at_k == [1.0, 1.0]
    assert first.family_rewards(["chain_sum"], "pass") == [1.0, 1.0]
    summary = {name: interval.mean for name, interval in first.measure_summary.items()}
    assert summary == {"first_sample": 0.5, "greedy": 0.5, "pass@3": 1.0}  # what the results file quotes
