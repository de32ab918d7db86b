# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""`prorl train`: the loop closed on one machine, cold start then RL, through the rollout service.

1. the embedded vLLM-CPU backend, serving LoRA adapters and reloading full weights in place, and
   the rollout service in front of it (the one stack `prorl serve` builds, on loopback with a
   token made for the run);
2. evaluate the base model on the held-out tasks;
3. program-written demonstrations of training tasks, through the real sandboxes and tools;
4. SFT of a LoRA on their token ids (a trainer process in the model venv); the adapter merged
   into the base model is published as v1 (full weights) and evaluated;
5. GRPO through the service, unconstrained, with a new LoRA over the v1 weights: each step's
   groups run on the policy the trainer holds, and each step's policy is published (v2, v3, ...)
   as full weights, the trainer merging its adapter (`grpo.publish_as`); the last one is
   evaluated. Each step mixes the RL families' tasks (never demonstrated) with rehearsal tasks of
   the demonstrated families, whose groups each hold the task's program-written demonstration
   beside the policy's own samples (`grpo.guide_rehearsal`), so a family the policy drifts away
   from keeps a rewarded sample to learn from;
6. the report: every step's metrics, the three evaluations with 95% intervals, the gains.

Rollouts and evaluations run on merged weights, not adapters: the same policy (log-probs within
~3e-5) at the base model's speed, where a runtime LoRA on vLLM-CPU runs several times slower.
The trainer talks to the service over HTTP only, the same API any trainer uses. Everything this
started (backend, service, trainer) is stopped on the way out, whatever happened.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from nemo_gym_prorl.assets import output_root
from nemo_gym_prorl.datasets.rows import write_jsonl
from nemo_gym_prorl.integrations.trl.jobs import Event, GrpoJob, MergeJob, adapter_dir, weights_dir
from nemo_gym_prorl.llm.access import LLMConfig
from nemo_gym_prorl.llm.embedded import EmbeddedLayout
from nemo_gym_prorl.llm.policy import PolicyVersion
from nemo_gym_prorl.provenance import results_dir_default
from nemo_gym_prorl.service.client import AsyncRolloutClient
from nemo_gym_prorl.training import progress
from nemo_gym_prorl.training.config import TrainConfig
from nemo_gym_prorl.training.demonstrations import (
    DemonstrationConfig,
    collect_demonstrations,
    demonstrate_rows,
)
from nemo_gym_prorl.training.environment_split import EnvironmentSplit
from nemo_gym_prorl.training.evaluation import PolicyEvaluation, evaluate, measure
from nemo_gym_prorl.training.heldout import SeedSplit
from nemo_gym_prorl.training.report import TrainReport
from nemo_gym_prorl.training.session import TrainingService, start_service
from nemo_gym_prorl.training.trainer_jobs import grpo_job, sft_job
from nemo_gym_prorl.training.trainer_process import TrainerFailed, run_trainer

Say = Callable[[str], None]


def _print(message: str) -> None:
    print(f"\033[1m[train]\033[0m {message}", flush=True)


def run_phases(config: TrainConfig) -> list[str]:
    """The phases a run goes through, in order (what its progress is measured against)."""
    evaluations = config.evaluation.phases
    measured = config.evaluation.measure.phases if config.evaluation.measure else []

    def evaluated(phase: str) -> list[str]:
        if phase not in evaluations:
            return []
        return [f"eval_{phase}", *([f"measure_{phase}"] if phase in measured else [])]

    phases = ["start", *evaluated("base")]
    if config.sft.adapter is None:
        phases += ["demonstrations", "sft"]
    phases += ["merge_sft", *evaluated("sft"), "grpo"]
    return phases + evaluated("grpo")


def recorded_seconds(name: str) -> dict[str, float] | None:
    """The phases' seconds in the last recorded run of this name (None: none recorded)."""
    path = results_dir_default() / f"{name}.json"
    try:
        seconds = json.loads(path.read_text())["figures"]["seconds"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return {str(k): float(v) for k, v in seconds.items()} if isinstance(seconds, dict) else None


async def run_training(config: TrainConfig, *, say: Say = _print, run_dir: Path | None = None) -> TrainReport:
    layout = EmbeddedLayout.default()
    run_dir = (run_dir or output_root() / "train" / config.name).resolve()
    policies = run_dir / "policies"
    clock = progress.RunClock(say, run_phases(config), expected=recorded_seconds(config.name))
    started = time.monotonic()
    tasks = config.task_rows()
    heldout = tasks.heldout_rows()
    heldout_families = [tasks.family(row) for row in heldout]
    report = TrainReport.start(
        config,
        demonstrated=[f for f in dict.fromkeys(heldout_families) if f in tasks.demonstrated],
        rl_families=[f for f in dict.fromkeys(heldout_families) if f not in tasks.demonstrated],
    )

    write_policy_settings(policies, config)
    async with AsyncExitStack() as stack:
        with clock.timed("start"):
            service = await start_service(config, stack, layout=layout, say=say)
            client = service.client

        async def evaluation(phase: str) -> PolicyEvaluation | None:
            if phase not in config.evaluation.phases:
                return None
            with clock.timed(f"eval_{phase}"):
                agent = f", through {config.harness['name']}" if config.harness else ""
                say(
                    f"evaluating {phase} on {len(heldout)} held-out tasks of the {tasks.heldout_set} set{agent} "
                    f"(unconstrained, {config.sampling})"
                )
                result = await evaluate(
                    client,
                    heldout,
                    heldout_families,
                    phase=phase,
                    sampling=config.sampling,
                    timeout_s=config.evaluation.timeout_s,
                    task=config.task,
                )
            report.evaluations[phase] = result
            for line in progress.evaluation_lines(result, tasks.demonstrated):
                say(line)
            settings = config.evaluation.measure
            families = heldout_families
            if settings is not None and settings.families == "rl_families":
                families = report.rl_families
            if settings is not None and phase in settings.phases and families:
                with clock.timed(f"measure_{phase}"):
                    say(
                        f"measuring {phase}: {'greedy and ' if settings.greedy else ''}pass@{settings.k} on the "
                        f"held-out tasks of {sorted(set(families))}"
                    )
                    await measure(
                        client,
                        heldout,
                        result,
                        set(families),
                        settings,
                        sampling=config.sampling,
                        timeout_s=config.evaluation.timeout_s,
                        task=config.task,
                    )
                say(progress.measure_line(result))
            return result

        await evaluation("base")

        sft_merged: Path | None = None  # written by the SFT trainer itself
        if config.sft.adapter is None:
            sft_adapter, sft_merged, tried = await _demonstrate_and_imitate(
                config, layout, service, run_dir, report, clock, say
            )
        else:
            sft_adapter, tried = config.sft.adapter, 0
            say(f"starting from the SFT adapter {sft_adapter} (no demonstrations, no SFT)")
        # GRPO trains its own LoRA over these weights, so the policy it starts from is the one
        # evaluated here.
        sft_weights = await publish_merged(
            service,
            layout.model_dir,
            sft_adapter,
            policies,
            version=1,
            clock=clock,
            phase="sft",
            say=say,
            merged=sft_merged,
        )
        report.sft["weights_path"] = str(sft_weights)
        await evaluation("sft")

        with clock.timed("grpo"):
            grpo_rows = tasks.grpo_rows(
                config.grpo.steps, config.grpo.prompts_per_step, tried, rehearsal=config.grpo.rehearsal
            )
            (run_dir / "grpo_samples.jsonl").unlink(missing_ok=True)
            (run_dir / "grpo_journal.json").unlink(missing_ok=True)
            guides = await write_guides(config, service, tasks, grpo_rows, run_dir, report, say)
            job = grpo_job(
                config,
                layout,
                service,
                prompts=run_dir / "grpo_prompts.jsonl",
                output_dir=policies,
                model_dir=str(sft_weights),
                init_adapter=None,
                version_offset=1,
                journal=str(run_dir / "grpo_journal.json"),
                samples_path=str(run_dir / "grpo_samples.jsonl"),
                guides=str(guides) if guides else None,
            )
            rehearsed = (
                f", {config.grpo.rehearsal} of them demonstrated families'" if config.grpo.rehearsal else ""
            )
            if guides:
                rehearsed += " (each guided by its demonstration)"
            say(
                f"GRPO ({config.grpo.loss_type}): {config.grpo.steps} steps of {config.grpo.prompts_per_step} "
                f"prompts{rehearsed} x {config.grpo.num_generations} rollouts through the service, "
                "unconstrained, a new LoRA over the v1 weights"
            )
            report.grpo = await run_grpo(
                job,
                grpo_rows,
                run_dir,
                report,
                say,
                restarts=config.grpo.restarts,
                served=served_policy(client),
                clock=clock,
            )
        last = report.grpo["published"][-1] if report.grpo.get("published") else None
        if (
            last is not None
        ):  # the final policy as a checkpoint: evaluated, and served by `prorl demo --policy`
            if last.get("weights_path"):  # published as full weights already: it is what the service serves
                grpo_weights = Path(last["weights_path"])
            else:
                grpo_weights = await publish_merged(
                    service,
                    sft_weights,
                    last["adapter_path"],
                    policies,
                    version=last["version"] + 1,
                    clock=clock,
                    phase="grpo",
                    say=say,
                )
            report.grpo["weights_path"] = str(grpo_weights)
            await evaluation("grpo")
        else:
            say(
                f"GRPO published no policy ({len(report.skipped_steps)} of {len(report.grpo_steps)} steps had "
                "no group to teach): the SFT policy stays the run's last, and GRPO is not evaluated"
            )

    report.finish(clock.seconds, time.monotonic() - started)
    return report


async def write_guides(
    config: TrainConfig,
    service: TrainingService,
    tasks: SeedSplit | EnvironmentSplit,
    rows: list[dict[str, Any]],
    run_dir: Path,
    report: TrainReport,
    say: Say,
) -> Path | None:
    """The program-written demonstrations that guide GRPO's rehearsal groups (`grpo_guides.jsonl`,
    one per rehearsal task whose demonstration was rewarded), or None when the run has none. Only
    demonstrated families' tasks are guided: what RL learns on the RL families stays its own."""
    if not (config.grpo.guide_rehearsal and config.grpo.rehearsal and isinstance(tasks, SeedSplit)):
        return None
    if not tasks.rl_families:  # every prompt is a demonstrated family's: none is rehearsal
        return None
    rehearsal = [row for row in rows if tasks.family(row) in tasks.demonstrated]
    started = time.monotonic()
    guides, dropped = await demonstrate_rows(rehearsal, demonstration_config(config, service))
    path = run_dir / "grpo_guides.jsonl"
    write_jsonl(
        path,
        (
            guides[str(row["task_id"])].model_dump(mode="json")
            for row in rehearsal
            if str(row["task_id"]) in guides
        ),
    )
    report.grpo_guides = {
        "path": str(path),
        "rehearsal_tasks": len(rehearsal),
        "guided": len(guides),
        "dropped": dropped,
        "seconds": round(time.monotonic() - started, 1),
    }
    say(
        f"{len(guides)} of {len(rehearsal)} rehearsal tasks guided by a program-written demonstration "
        f"({report.grpo_guides['seconds']:.0f} s)"
    )
    return path


def demonstration_config(config: TrainConfig, service: TrainingService) -> DemonstrationConfig:
    """Demonstrations of the run's split, on the backend its rollouts use, with its prompts."""
    return DemonstrationConfig(
        split=config.demonstration_tasks,
        llm=LLMConfig(
            backends=[service.backend_url], api_key=service.backend_api_key, tool_prompt=config.tool_prompt
        ),
        concurrency=config.demonstrations.concurrency,
        harness=config.harness,
    )


async def publish_merged(
    service: TrainingService,
    base: Path,
    adapter: str,
    policies: Path,
    *,
    version: int,
    clock: progress.RunClock,
    phase: str,
    say: Say,
    merged: Path | None = None,
) -> Path:
    """`adapter` merged into `base`, published as full weights under `version`; the checkpoint's
    directory. `merged`: the trainer that wrote the adapter merged it already; otherwise a merge
    program in the model venv does."""
    with clock.timed(f"merge_{phase}"):
        weights = merged
        if weights is None:
            job = MergeJob(
                model_dir=str(base), adapter=adapter, output_dir=str(weights_dir(policies, version))
            )
            done = await run_trainer("merge", job, workdir=policies.parent, on_event=lambda _: None)
            weights = Path(str(_fields(done[-1])["weights_path"]))
        published = await service.client.publish_policy(version, weights_path=str(weights))
    say(
        f"{phase} policy ({Path(adapter).name} merged into {base.name}) published as v{version}, full "
        f"weights, on {len(published.loaded)} backend(s) in {clock.seconds[f'merge_{phase}']:.0f} s"
    )
    return weights


async def _demonstrate_and_imitate(
    config: TrainConfig,
    layout: EmbeddedLayout,
    service: TrainingService,
    run_dir: Path,
    report: TrainReport,
    clock: progress.RunClock,
    say: Say,
) -> tuple[str, Path, int]:
    """Program-written demonstrations, then SFT on them: the adapter, the adapter merged into the
    model by the trainer, and how many training tasks the demonstrations tried (GRPO's
    demonstrated-family prompts come after them)."""
    with clock.timed("demonstrations"):
        through = f"{config.harness['name']} (unchanged)" if config.harness else "the real tools"
        say(f"writing {config.demonstrations.n} program-written demonstrations through {through}")
        demos, summary = await collect_demonstrations(
            config.demonstrations.n, demonstration_config(config, service), progress=None
        )
        demo_path = run_dir / "demonstrations.jsonl"
        write_jsonl(demo_path, (d.model_dump(mode="json") for d in demos))
        report.demonstrations = summary.model_copy(update={"path": str(demo_path)})
        say(progress.demonstrations_line(report.demonstrations))

    with clock.timed("sft"):
        sft = sft_job(config, layout, demonstrations=demo_path, output_dir=run_dir / "policies")
        events = await run_trainer(
            "sft", sft, workdir=run_dir, on_event=lambda e: _on_sft(e, report, say, clock)
        )
        report.sft = _fields(events[-1])
    return str(report.sft["adapter_path"]), Path(str(report.sft["weights_path"])), summary.tried


Served = Callable[[], Awaitable[PolicyVersion | None]]


async def run_grpo(
    job: GrpoJob,
    rows: list[dict[str, Any]],
    run_dir: Path,
    report: TrainReport,
    say: Say,
    *,
    restarts: int,
    served: Served | None = None,
    clock: progress.RunClock | None = None,
) -> dict[str, Any]:
    """The GRPO trainer to its end. If it dies, it is restarted (up to `restarts` times) from the
    last policy it published, for the steps it had left; the rollouts it had asked for are taken
    up from its journal, so none is lost or run twice.

    The last policy published is the service's word (`served`: what it serves now), not the
    trainer's events alone: a trainer killed after its publish but before its step event had
    published a version the service already serves, so the restart counts on from that one
    instead of asking for it again. Such a step is listed in `published` with `event_lost`."""
    total, first_offset = job.steps, job.version_offset
    published: list[dict[str, Any]] = []
    while True:
        write_jsonl(job.prompts, rows[(total - job.steps) * job.prompts_per_step :])
        before = len(report.grpo_steps)
        on_event = functools.partial(
            _on_grpo, report=report, say=say, steps=total, offset=total - job.steps, clock=clock
        )
        try:
            events = await run_trainer("grpo", job, workdir=run_dir, on_event=on_event)
        except TrainerFailed as exc:
            if restarts <= 0:
                raise
            restarts -= 1
            announced = [
                {"version": s["version"], "adapter_path": s.get("adapter_path")}
                for s in report.grpo_steps[before:]
                if "version" in s
            ]
            published += announced
            version = announced[-1]["version"] if announced else job.version_offset
            adapter = announced[-1]["adapter_path"] if announced else job.init_adapter
            current = await served() if served is not None else None
            if current is not None and current.version > version:
                # The trainer saves each step's adapter before it publishes the step's policy (the
                # adapter itself, or weights merged from it), so the served version's is on disk.
                served_adapter = current.source.adapter_path or str(
                    adapter_dir(Path(job.output_dir), current.version)
                )
                published.append(
                    {
                        "version": current.version,
                        "adapter_path": served_adapter,
                        "weights_path": current.source.weights_path,
                        "event_lost": True,
                    }
                )
                version, adapter = current.version, served_adapter
            job = job.model_copy(
                update={
                    "init_adapter": adapter,
                    "version_offset": version,
                    "steps": total - (version - first_offset),
                }
            )
            say(
                f"the GRPO trainer died ({str(exc).splitlines()[0]}); restarting from v{version} for its "
                f"{job.steps} step(s) left"
            )
            if job.steps <= 0:
                return {"published": published, "restarted_after_last_step": True}
            continue
        done = _fields(events[-1])
        done["published"] = [*published, *done.get("published", [])]
        return done


def served_policy(client: AsyncRolloutClient) -> Served:
    async def current() -> PolicyVersion | None:
        return (await client.policy()).served.current

    return current


POLICY_SETTINGS = "training.json"


def write_policy_settings(policies: Path, config: TrainConfig) -> None:
    """Beside the adapters, what their prompts looked like and how they were sampled: a policy is
    served again (`prorl demo --policy`) the way it was trained."""
    policies.mkdir(parents=True, exist_ok=True)
    settings = {
        "tool_prompt": config.tool_prompt,
        "sampling": config.sampling,
        "split": config.split.model_dump(mode="json"),
        "harness": config.harness,
    }
    (policies / POLICY_SETTINGS).write_text(json.dumps(settings, indent=2) + "\n")


def read_policy_settings(adapter: Path) -> dict[str, Any]:
    """The settings `prorl train` wrote beside an adapter (empty for an adapter from elsewhere)."""
    path = adapter.parent / POLICY_SETTINGS
    return json.loads(path.read_text()) if path.is_file() else {}


def _fields(event: Event) -> dict[str, Any]:
    return event.model_dump(exclude={"event"})


def _on_sft(event: Event, report: TrainReport, say: Say, clock: progress.RunClock | None = None) -> None:
    if event.event == "step":
        step = _fields(event)
        report.sft_steps.append(step)
        say(progress.sft_step_line(step))
        if clock is not None:
            clock.within("sft", int(step["step"]), int(step["of"]))


def _on_grpo(
    event: Event,
    report: TrainReport,
    say: Say,
    steps: int,
    *,
    offset: int = 0,
    clock: progress.RunClock | None = None,
) -> None:
    if event.event == "step":
        fields = _fields(event)
        fields["step"] = offset + fields["step"]  # a restarted trainer counts its steps from 1 again
        report.grpo_steps.append(fields)
        say(progress.grpo_step_line(fields, steps))
        if clock is not None:
            clock.within("grpo", int(fields["step"]), steps)
