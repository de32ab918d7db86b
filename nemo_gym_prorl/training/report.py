# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""What a `prorl train` run measured, the checks a user reads first, and where it is written:
`benchmarks/results/<name>.json` (with the commit and the machine, like every benchmark) and
`<name>.png` (reward and tool calls per GRPO step; held-out base / SFT / GRPO)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from nemo_gym_prorl.integrations.trl.stats import Interval
from nemo_gym_prorl.provenance import record, results_dir_default
from nemo_gym_prorl.training.config import TrainConfig
from nemo_gym_prorl.training.demonstration_records import DemonstrationSummary
from nemo_gym_prorl.training.evaluation import PolicyEvaluation, paired_gain

# What the run should show (the README states them): the GRPO policy beats the base by this
# much on held-out tasks, uses the tool, and the trainer's log-probs match the rollouts'.
MIN_GAIN = 0.2
MIN_TOOL_CALLS = 1.0
MAX_MISMATCH = 0.05


class TrainReport(BaseModel):
    config: dict[str, Any]
    demonstrations: DemonstrationSummary | None = None
    sft: dict[str, Any] = Field(default_factory=dict)
    sft_steps: list[dict[str, Any]] = Field(default_factory=list)
    grpo: dict[str, Any] = Field(default_factory=dict)
    grpo_steps: list[dict[str, Any]] = Field(default_factory=list)
    evaluations: dict[str, PolicyEvaluation] = Field(default_factory=dict)
    gains: dict[str, Interval] = Field(default_factory=dict, description="paired per-task reward gains")
    checks: dict[str, bool] = Field(default_factory=dict)
    seconds: dict[str, float] = Field(default_factory=dict)
    total_seconds: float = 0.0

    @classmethod
    def start(cls, config: TrainConfig) -> TrainReport:
        return cls(config=config.model_dump(mode="json"))

    def finish(self, seconds: dict[str, float], total_seconds: float) -> None:
        self.seconds = dict(seconds)
        self.total_seconds = round(total_seconds, 1)
        base = self.evaluations.get("base")
        for phase in ("sft", "grpo"):
            if base is not None and phase in self.evaluations:
                self.gains[f"{phase}_vs_base"] = paired_gain(base, self.evaluations[phase])
        if "sft" in self.evaluations and "grpo" in self.evaluations:
            self.gains["grpo_vs_sft"] = paired_gain(self.evaluations["sft"], self.evaluations["grpo"])
        gain = self.gains.get("grpo_vs_base")
        grpo = self.evaluations.get("grpo")
        mismatches = [s["mismatch"]["mean_abs_diff"] for s in self.grpo_steps if "mismatch" in s]
        bound = self.config.get("max_staleness")
        self.checks = {
            "grpo_gain_at_least_0.2": gain is not None and gain.mean >= MIN_GAIN,
            "grpo_gain_interval_above_zero": gain is not None and gain.low > 0,
            "grpo_tool_calls_at_least_1": grpo is not None
            and grpo.stats.tool_calls_per_rollout >= MIN_TOOL_CALLS,
            "mismatch_at_most_0.05_every_step": bool(mismatches)
            and all(not math.isnan(m) and m <= MAX_MISMATCH for m in mismatches),
            "staleness_within_bound_or_flagged": all(
                s.get("staleness") is None or bound is None or s["staleness"] <= bound or s.get("stale")
                for s in self.grpo_steps
            ),
            "every_rollout_records_its_versions": all(s.get("policy_versions") for s in self.grpo_steps),
        }

    def summary(self) -> str:
        parts = []
        for phase in ("base", "sft", "grpo"):
            if phase in self.evaluations:
                r = self.evaluations[phase].stats
                parts.append(
                    f"{phase} {r.reward.mean:.2f} [{r.reward.low:.2f}, {r.reward.high:.2f}], "
                    f"{r.tool_calls_per_rollout:.2f} tool calls"
                )
        gain = self.gains.get("grpo_vs_base")
        if gain is not None:
            parts.append(f"GRPO - base {gain.mean:+.2f} [{gain.low:+.2f}, {gain.high:+.2f}]")
        parts.append(f"{self.total_seconds / 60:.1f} min")
        return "held-out reward: " + "; ".join(parts)


def write_results(report: TrainReport, name: str, results_dir: Path | None = None) -> tuple[Path, Path]:
    """`<results_dir>/<name>.json` (provenance included) and `<name>.png`."""
    out = results_dir or results_dir_default()
    path = record(
        name,
        report.model_dump(mode="json"),
        simulated=[],
        ours="SFT on program-written demonstrations, then GRPO through the service (TRL + PEFT LoRA on CPU)",
        against="the base model on the same held-out tasks and sampling",
        measured=report.summary(),
        command="prorl train",
        results_dir=out,
    )
    return path, plot(report, out / f"{name}.png")


def plot(report: TrainReport, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (steps_ax, eval_ax) = plt.subplots(1, 2, figsize=(11, 4))
    steps = [s["step"] for s in report.grpo_steps]
    steps_ax.plot(steps, [s["reward"] for s in report.grpo_steps], "o-", label="mean reward")
    steps_ax.set_xlabel("GRPO step")
    steps_ax.set_ylabel("reward")
    tools_ax = steps_ax.twinx()
    tools_ax.plot(
        steps, [s["tool_calls"] for s in report.grpo_steps], "s--", color="tab:orange", label="tool calls"
    )
    tools_ax.set_ylabel("tool calls per rollout")
    steps_ax.set_title("training rollouts (per step)")
    steps_ax.legend(loc="upper left")
    tools_ax.legend(loc="lower right")

    phases = [p for p in ("base", "sft", "grpo") if p in report.evaluations]
    means = [report.evaluations[p].stats.reward.mean for p in phases]
    errors = [
        [m - report.evaluations[p].stats.reward.low for p, m in zip(phases, means, strict=True)],
        [report.evaluations[p].stats.reward.high - m for p, m in zip(phases, means, strict=True)],
    ]
    eval_ax.bar(
        phases, means, yerr=errors, capsize=6, color=["tab:gray", "tab:blue", "tab:green"][: len(phases)]
    )
    for x, p in enumerate(phases):
        calls = report.evaluations[p].stats.tool_calls_per_rollout
        eval_ax.text(x, 0.02, f"{calls:.2f} tool calls", ha="center", fontsize=8)
    n = report.evaluations[phases[0]].stats.rollouts if phases else 0
    eval_ax.set_title(f"held-out reward ({n} tasks, 95% CI)")
    eval_ax.set_ylim(0, 1.05)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
