# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Trainer processes: a trainer that fails is a clear error with its log's tail and leaves
nothing running; a GRPO trainer that dies mid-run is restarted from the last policy it
published (by its own events, or by what the service serves when it died before announcing a
publish), for the steps it had left, on the prompts it had not trained on."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import psutil
import pytest

from nemo_gym_prorl.integrations.trl.jobs import Event, GrpoJob, OptimizerSettings, SftJob
from nemo_gym_prorl.llm.embedded import EmbeddedLayout
from nemo_gym_prorl.llm.policy import PolicySource, PolicyVersion
from nemo_gym_prorl.training import loop
from nemo_gym_prorl.training.config import TrainConfig
from nemo_gym_prorl.training.report import TrainReport
from nemo_gym_prorl.training.trainer_process import TrainerFailed, run_trainer


@pytest.mark.slow
def test_a_trainer_that_fails_is_a_clear_error_with_its_log_and_leaves_nothing_running(
    tmp_path: Path,
) -> None:
    layout = EmbeddedLayout.default()
    if not layout.python.exists():
        pytest.skip(f"the model venv is not built under {layout.home}: run `prorl model setup`")
    job = SftJob(
        model_dir=str(layout.model_dir),
        demonstrations=str(tmp_path / "missing.jsonl"),
        output_dir=str(tmp_path / "policies"),
        optimizer=OptimizerSettings(learning_rate=1e-4),
    )
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    with pytest.raises(TrainerFailed, match=r"(?s)sft trainer exited with 1.*missing\.jsonl"):
        asyncio.run(run_trainer("sft", job, workdir=tmp_path, on_event=lambda _: None))
    assert {p.pid for p in psutil.Process().children(recursive=True)} - before == set()


def grpo_job(tmp_path: Path, steps: int) -> GrpoJob:
    return GrpoJob(
        model_dir="/model",
        init_adapter="/policies/policy-v000001",
        service_url="http://127.0.0.1:1",
        prompts=str(tmp_path / "prompts.jsonl"),
        output_dir=str(tmp_path / "policies"),
        optimizer=OptimizerSettings(learning_rate=1e-5),
        steps=steps,
        prompts_per_step=2,
        version_offset=1,
    )


def step_event(step: int, version: int) -> Event:
    mismatch = {"mean_abs_diff": 0.0, "tokens": 1, "ratio_min": 1.0, "ratio_max": 1.0}
    return Event(
        event="step", step=step, version=version, adapter_path=f"/p/policy-v{version}", reward=0.5,
        informative_groups=1, groups=2, tool_calls=1.0, turns=2.0, staleness=0, policy_versions=[version - 1],
        masked=0, rollout_s=1.0, rollout_tokens_per_s=1.0, mismatch=mismatch, train_s=1.0,
        train_tokens_per_s=1.0, publish_s=0.1,
    )  # fmt: skip


def trainer_dying_once(calls: list[dict[str, Any]], first_run: Any) -> Any:
    """A stand-in for `run_trainer`: its first run does `first_run(job, on_event)` and dies; the
    restart trains one step and publishes v4."""

    async def trainer(program: str, job: GrpoJob, *, workdir: Path, on_event: Any) -> list[Event]:
        prompts = [json.loads(line)["seed"] for line in Path(job.prompts).read_text().splitlines()]
        calls.append({"job": job, "prompts": prompts})
        if len(calls) == 1:
            first_run(job, on_event)
            raise TrainerFailed("the grpo trainer exited with -9")
        on_event(step_event(1, job.version_offset + 1))
        return [Event(event="done", published=[{"version": 4, "adapter_path": "/p/policy-v4"}])]

    return trainer


def test_a_grpo_trainer_that_dies_is_restarted_from_its_last_published_policy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[dict[str, Any]] = []

    def first_run(job: GrpoJob, on_event: Any) -> None:  # trains steps 1 and 2 (v2, v3), dies in step 3
        for step in (1, 2):
            on_event(step_event(step, job.version_offset + step))

    monkeypatch.setattr(loop, "run_trainer", trainer_dying_once(calls, first_run))
    report = TrainReport.start(TrainConfig())
    rows = [{"seed": s} for s in range(6)]
    done = asyncio.run(
        loop.run_grpo(grpo_job(tmp_path, 3), rows, tmp_path, report, lambda _: None, restarts=1)
    )

    first, second = calls
    assert first["prompts"] == [0, 1, 2, 3, 4, 5]
    assert second["prompts"] == [4, 5]  # step 3's prompts: what it had not trained on
    assert second["job"].init_adapter == "/p/policy-v3" and second["job"].version_offset == 3
    assert second["job"].steps == 1
    assert [s["step"] for s in report.grpo_steps] == [1, 2, 3]  # one run of steps, as the user sees it
    assert [p["version"] for p in done["published"]] == [2, 3, 4]


def test_a_trainer_killed_between_its_publish_and_its_step_event_restarts_from_the_version_the_service_serves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[dict[str, Any]] = []

    def first_run(job: GrpoJob, on_event: Any) -> None:  # announces step 1 (v2); v3 is published unannounced
        on_event(step_event(1, 2))

    async def served() -> PolicyVersion:  # what the service serves: v3, published before the kill
        return PolicyVersion(
            version=3,
            served_name="policy-v3",
            source=PolicySource(adapter_path="/p/policy-v000003"),
            published_at_unix_s=0.0,
        )

    monkeypatch.setattr(loop, "run_trainer", trainer_dying_once(calls, first_run))
    report = TrainReport.start(TrainConfig())
    rows = [{"seed": s} for s in range(6)]
    done = asyncio.run(
        loop.run_grpo(
            grpo_job(tmp_path, 3), rows, tmp_path, report, lambda _: None, restarts=1, served=served
        )
    )

    second = calls[1]
    assert second["job"].init_adapter == "/p/policy-v000003" and second["job"].version_offset == 3
    assert second["job"].steps == 1 and second["prompts"] == [4, 5]  # step 3: v3 is not asked for again
    assert [(p["version"], p.get("event_lost", False)) for p in done["published"]] == [
        (2, False),
        (3, True),
        (4, False),
    ]


def test_a_grpo_trainer_that_keeps_dying_is_an_error_once_its_restarts_are_spent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def trainer(*args: Any, **kwargs: Any) -> list[Event]:
        raise TrainerFailed("the grpo trainer exited with 1")

    monkeypatch.setattr(loop, "run_trainer", trainer)
    report = TrainReport.start(TrainConfig())
    with pytest.raises(TrainerFailed):
        asyncio.run(
            loop.run_grpo(grpo_job(tmp_path, 2), [{"seed": 0}] * 4, tmp_path, report, print, restarts=1)
        )
