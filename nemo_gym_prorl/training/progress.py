# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""`prorl train`'s progress lines: one per evaluation, demonstration run and trainer step, and
the whole run's progress bar (`RunClock`)."""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from nemo_gym_prorl.training.demonstration_records import DemonstrationSummary
from nemo_gym_prorl.training.evaluation import PolicyEvaluation


def evaluation_lines(result: PolicyEvaluation, demonstrated: Collection[str]) -> list[str]:
    """The phase's reward over every held-out task, then one line per family."""
    s = result.stats
    version = "base model" if result.policy_version is None else f"policy v{result.policy_version}"
    lines = [
        f"held-out {result.phase} ({version}): reward {s.reward.text()} (95% CI) over {s.scored} tasks "
        f"({s.masked} masked); {s.tool_calls_per_rollout:.2f} tool calls, {s.turns_per_rollout:.2f} turns "
        f"per rollout{_harness(s.merged_share, None)}; {result.seconds:.0f}s"
    ]
    for family, f in result.by_family.items():
        kind = "demonstrated" if family in demonstrated else "no demonstrations"
        lines.append(
            f"  {family} ({kind}): {f.reward.text()} over {f.scored}; {f.tool_calls_per_rollout:.2f} tool calls, "
            f"{f.turns_per_rollout:.2f} turns"
        )
    return lines


def measure_line(result: PolicyEvaluation) -> str:
    """The greedy and pass@k rewards of a measured phase beside its first sample's, on the same tasks."""
    cells = [
        f"{name.replace('_', ' ')} {interval.text()}" for name, interval in result.measure_summary.items()
    ]
    return (
        f"  {result.phase} on {result.measured_families}: "
        + ", ".join(cells)
        + f"; {result.measure_seconds:.0f}s"
    )


def demonstrations_line(summary: DemonstrationSummary) -> str:
    return (
        f"demonstrations: {summary.kept} kept of {summary.tried} tried ({summary.dropped or 'none dropped'}), "
        f"{summary.seconds:.0f}s; families {summary.families}; "
        f"{summary.model_tokens.mean:.0f} model tokens each -> {summary.path}"
    )


def sft_step_line(step: Mapping[str, Any]) -> str:
    return f"SFT step {step['step']}/{step['of']} (epoch {step['epoch']:.2f}): loss {step['loss']:.4f}, {step['seconds']:.0f}s"


def grpo_step_line(step: Mapping[str, Any], steps: int) -> str:
    if step.get("simulated"):
        train = f"SIMULATED train {step['train_s']:.0f}s"
    elif step.get("skipped"):
        train = f"{step['skipped']}: nothing trained ({step['train_s']:.0f}s), no version published"
    else:
        m = step["mismatch"]
        train = (
            f"log-prob mismatch {m['mean_abs_diff']:.2e} over {m['tokens']} tokens (ratio {m['ratio_min']:.3f}-{m['ratio_max']:.3f}); "
            f"train {step['train_s']:.0f}s at {step['train_tokens_per_s']:.0f} tok/s; publish v{step['version']} "
            f"{step['publish_s']:.1f}s"
        )
    return (
        f"GRPO step {step['step']}/{steps}: reward {step['reward']:.3f}, "
        f"{step['informative_groups']}/{step['groups']} informative groups"
        f"{f' ({g} guided by a demonstration)' if (g := step.get('guided_groups')) else ''}, "
        f"{step['tool_calls']:.2f} tool calls, {step['turns']:.2f} turns per rollout, "
        f"staleness {step['staleness']} ({step.get('staleness_at_update')} at the update), "
        f"versions {step['policy_versions']}, {step['masked']} masked"
        f"{_harness(step.get('merged_share'), step.get('delivered_share'), step.get('undelivered_shares'))}; "
        f"rollouts {step['rollout_s']:.0f}s at {step['rollout_tokens_per_s']:.0f} tok/s; {train}"
    )


def _harness(
    merged: float | None, delivered: float | None, undelivered: Mapping[str, float] | None = None
) -> str:
    """A harness's token bookkeeping, where there is a harness: how many of its calls extended
    the previous one's token sequence, how much of what it generated reached the trainer, and why
    the rest did not."""
    rest = "".join(f", {share:.2f} {why}" for why, share in (undelivered or {}).items())
    parts = [
        f"merged share {merged:.2f}" if merged is not None else "",
        f"delivered share {delivered:.2f}{f' (not delivered{rest})' if rest else ''}"
        if delivered is not None
        else "",
    ]
    return "".join(f", {p}" for p in parts if p)


# -- the whole run: its phases, how far it is, how long it has left -----------------------------

# The shape of a run when none of its name was recorded: the default run's phases, in seconds.
REFERENCE_SECONDS = {
    "start": 90.0,
    "eval_base": 160.0,
    "demonstrations": 25.0,
    "sft": 180.0,
    "merge_sft": 20.0,
    "eval_sft": 290.0,
    "measure_sft": 500.0,
    "grpo": 1650.0,
    "eval_grpo": 330.0,
    "measure_grpo": 500.0,
}


class RunClock:
    """Times a run's phases (`seconds`) and says, at each phase's end and each trainer step, how
    far the whole run is and how long it has left: the phases weighted by their seconds in the
    last recorded run of the same name (`expected`), else by the default run's, and the time left
    extrapolated from this run's own pace."""

    def __init__(
        self, say: Callable[[str], None], phases: Sequence[str], expected: Mapping[str, float] | None = None
    ) -> None:
        self.say = say
        shape = dict(expected or REFERENCE_SECONDS)
        self.weights = {p: float(shape.get(p, REFERENCE_SECONDS.get(p, 60.0))) for p in phases}
        self.seconds: dict[str, float] = {}
        self.started = time.monotonic()

    @contextmanager
    def timed(self, name: str) -> Iterator[None]:
        """Record the block's wall-clock seconds under `name`; report progress when it ends
        well (a phase cut short by a failure or a signal is not done)."""
        started = time.monotonic()
        try:
            yield
        finally:
            self.seconds[name] = round(time.monotonic() - started, 1)
        self.report(name)

    def within(self, name: str, done: int, of: int) -> None:
        """A step of the phase `name` has ended (`done` of `of`)."""
        self.report(name, done / of if of else 1.0, f"{name} step {done}/{of}")

    def fraction(self, current: str | None = None, share: float = 0.0) -> float:
        total = sum(self.weights.values()) or 1.0
        done = sum(w for p, w in self.weights.items() if p in self.seconds)
        if current is not None and current not in self.seconds:
            done += self.weights.get(current, 0.0) * min(max(share, 0.0), 1.0)
        return min(done / total, 1.0)

    def report(self, name: str, share: float = 1.0, label: str | None = None) -> None:
        fraction = self.fraction(name, share)
        elapsed = time.monotonic() - self.started
        left = elapsed * (1 - fraction) / fraction if fraction > 0 else None
        bar = "#" * round(20 * fraction) + "-" * (20 - round(20 * fraction))
        eta = f", ~{left / 60:.0f} min left" if left is not None and fraction < 1 else ""
        self.say(f"[{bar}] {fraction:4.0%} {label or name + ' done'} | {elapsed / 60:.0f} min elapsed{eta}")
