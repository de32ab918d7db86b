# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Collecting ahead: with the training order given, each step's call submits the next step's
groups as soon as its own results are in, so they run while the trainer trains; the next call
takes them instead of submitting again. Prompts other than the expected ones cancel the prepared
jobs. A trainer that dies mid-step loses no rollout: its restart takes them up from the journal.
(The trainer-side modules need only httpx and pydantic, so this runs in the project venv.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.scripted_rollout_service import ScriptedRolloutService, model_turn

from nemo_gym_prorl.integrations.trl.client import ServiceClient
from nemo_gym_prorl.integrations.trl.rollout import ServiceRollout, prompt_column, split_groups
from nemo_gym_prorl.rollouts.stats import RolloutStats


def script(job: dict[str, Any], index: int) -> dict[str, Any]:
    seed = int(job["instance"]["seed"])
    return {
        "reward": float(index % 2),
        "policy_versions": [seed],
        "staleness": 0,
        "trajectory": {
            "stop_reason": "answered",
            "steps": [{"tool": "ipython"}] * (index % 3),
            "num_turns": 1 + index % 3,
            "generated_tokens": 5,
            "messages": [model_turn([seed, 1], [2, 3])],
        },
    }


def rollout_on(
    service: ScriptedRolloutService, prompts: list[str], *, ahead: bool, journal: Path | None = None
) -> ServiceRollout:
    client = ServiceClient("http://svc.test", transport=service.transport())
    return ServiceRollout(client, task="math", ahead=prompts if ahead else None, journal=journal)


def groups(prompts: list[str], size: int) -> list[list[str]]:
    return split_groups([p for p in prompts for _ in range(size)], size)


PROMPTS = prompt_column([{"seed": s} for s in range(6)])


def test_the_next_steps_groups_are_submitted_with_this_steps_results_and_taken_by_the_next_call() -> None:
    service = ScriptedRolloutService(script)
    rollout = rollout_on(service, PROMPTS, ahead=True)
    rollout.collect(groups(PROMPTS[0:2], 2), step=0)
    assert [job["instance"]["seed"] for job in service.jobs] == [0, 0, 1, 1, 2, 2, 3, 3]  # step 2's already
    results = rollout.collect(groups(PROMPTS[2:4], 2), step=1)
    assert [r["id"] for r in results] == ["job-4", "job-5", "job-6", "job-7"]  # the prepared jobs
    assert rollout.ahead_hits == 1 and rollout.ahead_misses == 0
    assert [job["metadata"]["trainer_step"] for job in service.jobs[4:8]] == [1, 1, 1, 1]


def test_other_prompts_than_expected_cancel_the_prepared_jobs_and_run_the_asked_for_ones() -> None:
    service = ScriptedRolloutService(script)
    rollout = rollout_on(service, PROMPTS, ahead=True)
    rollout.collect(groups(PROMPTS[0:2], 2), step=0)
    results = rollout.collect(groups(PROMPTS[4:6], 2), step=1)
    assert service.cancelled == ["job-4", "job-5", "job-6", "job-7"]
    assert [service.jobs[int(r["id"].split("-")[1])]["instance"]["seed"] for r in results] == [4, 4, 5, 5]
    assert rollout.ahead_misses == 1


def test_the_order_wraps_around_like_another_epoch_and_close_cancels_what_is_left() -> None:
    service = ScriptedRolloutService(script)
    rollout = rollout_on(service, PROMPTS[:4], ahead=True)
    rollout.collect(groups(PROMPTS[2:4], 2), step=0)
    assert [job["instance"]["seed"] for job in service.jobs[4:]] == [0, 0, 1, 1]
    rollout.close()
    assert service.cancelled == ["job-4", "job-5", "job-6", "job-7"]


def test_without_an_order_nothing_is_submitted_ahead() -> None:
    service = ScriptedRolloutService(script)
    rollout = rollout_on(service, PROMPTS, ahead=False)
    rollout.collect(groups(PROMPTS[0:2], 2), step=0)
    assert len(service.jobs) == 4 and rollout.ahead_hits == rollout.ahead_misses == 0


def test_a_steps_stats_count_rewards_tool_use_and_informative_groups() -> None:
    service = ScriptedRolloutService(script)
    rollout = rollout_on(service, PROMPTS, ahead=False)
    stats = RolloutStats.of(rollout.collect(groups(PROMPTS[0:2], 2), step=0))
    assert stats.rollouts == stats.scored == 4 and stats.masked == 0
    assert stats.mean_reward == 0.5 and stats.informative_groups == 2 and stats.groups == 2
    assert stats.tool_calls_per_rollout == (0 + 1 + 2 + 0) / 4
    assert stats.turns_per_rollout == (1 + 2 + 3 + 1) / 4
    assert stats.policy_versions == [0, 1] and stats.max_staleness == 0
    assert stats.reward.n == 4 and stats.reward.low < 0.5 < stats.reward.high


class TrainerDied(RuntimeError):
    pass


def test_a_trainer_that_dies_mid_step_loses_no_rollout_its_restart_takes_them_up(tmp_path: Path) -> None:
    service = ScriptedRolloutService(script)
    journal = tmp_path / "journal.json"
    first = rollout_on(service, PROMPTS, ahead=False, journal=journal)
    first.client.wait_all = lambda *a, **k: (_ for _ in ()).throw(TrainerDied("killed mid-step"))  # type: ignore[method-assign]
    with pytest.raises(TrainerDied):
        first.collect(groups(PROMPTS[0:2], 2), step=3)
    assert len(service.jobs) == 4  # submitted; the service keeps running them

    restarted = rollout_on(service, PROMPTS, ahead=False, journal=journal)
    results = restarted.collect(groups(PROMPTS[0:2], 2), step=3)
    assert len(service.jobs) == 4 and restarted.carried_over == 4  # taken up, not submitted again
    assert [r["id"] for r in results] == ["job-0", "job-1", "job-2", "job-3"]
    assert restarted.collect(groups(PROMPTS[2:4], 2), step=4) and restarted.carried_over == 4  # consumed once


def test_rollouts_handed_to_a_trainer_that_dies_before_publishing_are_taken_up_and_gone_once_published(
    tmp_path: Path,
) -> None:
    service = ScriptedRolloutService(script)
    journal = tmp_path / "journal.json"
    first = rollout_on(service, PROMPTS, ahead=False, journal=journal)
    handed = first.collect(groups(PROMPTS[0:2], 2), step=3)  # trained on, then killed before its publish

    restarted = rollout_on(
        service, PROMPTS, ahead=False, journal=journal
    )  # from the policy that sampled them
    again = restarted.collect(groups(PROMPTS[0:2], 2), step=3)
    assert [r["id"] for r in again] == [r["id"] for r in handed] and len(service.jobs) == 4
    restarted.settle()  # this time the step was published
    assert (
        restarted.collect(groups(PROMPTS[0:2], 2), step=4) and len(service.jobs) == 8
    )  # a new step: new rollouts


def test_every_job_carries_an_id_of_its_group_and_sample_unique_across_steps_and_rollouts() -> None:
    """The trainer's own ids make its submits idempotent: a submit resent after a lost answer is
    the same jobs (the service takes a known id as that job), never a second copy."""
    service = ScriptedRolloutService(script)
    first = rollout_on(service, PROMPTS, ahead=False)
    first.collect(groups(PROMPTS[0:2], 3), step=0)
    first.collect(groups(PROMPTS[2:4], 3), step=1)
    rollout_on(service, PROMPTS, ahead=False).collect(groups(PROMPTS[0:2], 3), step=0)  # a restart
    ids = [job["id"] for job in service.jobs]
    assert len(ids) == len(set(ids)) == 18
    for job in service.jobs:
        group, sample = job["id"].rsplit("-", 1)
        assert group == job["group_id"] and sample in {"0", "1", "2"}
