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

from nemo_gym_prorl.intervals import Interval
from nemo_gym_prorl.intervals import paired_gain as paired_interval
from nemo_gym_prorl.provenance import record, results_dir_default
from nemo_gym_prorl.training.config import TrainConfig
from nemo_gym_prorl.training.demonstration_records import DemonstrationSummary
from nemo_gym_prorl.training.evaluation import Metric, PolicyEvaluation, paired_gain

# What the run should show (the README states them). RL's own effect is measured against the
# policy it started from (the SFT adapter) on held-out tasks of families no demonstration shows;
# the demonstrated families must not fall under RL beyond their interval; the demonstrations'
# effect is SFT's over the base model; the trainer's log-probs match the rollouts'.
MIN_RL_GAIN = 0.10
MIN_TOOL_CALLS = 1.0
MAX_MISMATCH = 1e-3  # fp32 trainer and server: observed ~1e-6 to 3e-6 per token; bf16 alone is ~1e-2
MAX_MINUTES = 60.0

# (name, phase before, phase after): each gain is credited to the phase that made it.
PHASE_GAINS = (
    ("sft_over_base", "base", "sft"),
    ("rl_over_sft", "sft", "grpo"),
    ("rl_over_base", "base", "grpo"),
)


def smallest_flagged_drop(tasks: int, start_rate: float) -> float | None:
    """The forgetting check's power on a family of `tasks` held-out tasks solved at `start_rate`:
    the smallest observed drop (a share of the tasks, each a pair solved before and failed after,
    the rest unchanged) whose paired interval lies below zero, so that the check fails. None: no
    drop can (too few tasks solved to lose)."""
    solved = round(start_rate * tasks)
    before = [1.0] * solved + [0.0] * (tasks - solved)
    for lost in range(1, solved + 1):
        after = [0.0] * lost + before[lost:]
        if paired_interval(before, after).high < 0:
            return round(lost / tasks, 4)
    return None


class FamilyRow(BaseModel):
    """One family in one evaluated phase."""

    reward: Interval
    tool_calls: float
    turns: float


class TrainReport(BaseModel):
    config: dict[str, Any]
    demonstrated_families: list[str] = Field(default_factory=list)
    rl_families: list[str] = Field(
        default_factory=list, description="held-out families without demonstrations"
    )
    demonstrations: DemonstrationSummary | None = None
    sft: dict[str, Any] = Field(default_factory=dict)
    sft_steps: list[dict[str, Any]] = Field(default_factory=list)
    grpo: dict[str, Any] = Field(default_factory=dict)
    grpo_guides: dict[str, Any] = Field(
        default_factory=dict,
        description="the program-written demonstrations that guided GRPO's rehearsal groups (none: unguided)",
    )
    grpo_steps: list[dict[str, Any]] = Field(default_factory=list)
    evaluations: dict[str, PolicyEvaluation] = Field(default_factory=dict)
    families: dict[str, dict[str, FamilyRow]] = Field(
        default_factory=dict, description="family -> phase -> reward, tool calls and turns per rollout"
    )
    gains: dict[str, Interval] = Field(
        default_factory=dict,
        description="paired per-task reward gains, '<phase>_over_<phase>:<families>' (demonstrated, "
        "rl_families, all, or one family)",
    )
    heldout: dict[str, Any] = Field(
        default_factory=dict,
        description="the held-out set evaluated ('tuning' or 'test') and the seeds of both",
    )
    forgetting_check_power: dict[str, Any] = Field(
        default_factory=dict,
        description="per demonstrated family: its held-out tasks and the smallest drop under RL the "
        "forgetting check can flag there (from the family's reward after SFT)",
    )
    checks: dict[str, bool] = Field(default_factory=dict)
    seconds: dict[str, float] = Field(default_factory=dict)
    total_seconds: float = 0.0

    @classmethod
    def start(
        cls,
        config: TrainConfig,
        *,
        demonstrated: list[str] | None = None,
        rl_families: list[str] | None = None,
    ) -> TrainReport:
        split = config.split
        heldout: dict[str, Any] = {"set": split.heldout_set}
        if config.swe is not None:
            heldout = {
                "set": config.swe.heldout_set,
                "instances": f"{config.swe.per_project_heldout} generated instances of each project "
                "(the tuning set the first in the split's order, the test set the next)",
            }
        elif config.environment is None:
            heldout |= {
                "tuning_seeds": list(split.heldout_seeds("tuning")),
                "test_seeds": list(split.heldout_seeds("test")),
            }
        else:
            heldout["rows"] = f"{config.environment}'s validation rows ({split.heldout_set} set)"
        return cls(
            config=config.model_dump(mode="json"),
            demonstrated_families=list(demonstrated or []),
            rl_families=list(rl_families or []),
            heldout=heldout,
        )

    def finish(self, seconds: dict[str, float], total_seconds: float) -> None:
        self.seconds = dict(seconds)
        self.total_seconds = round(total_seconds, 1)
        self._tabulate_families()
        self._pair_phases()
        self._forgetting_check_power()
        self.checks = self._checks()

    def _tabulate_families(self) -> None:
        self.families = {}
        for phase, evaluation in self.evaluations.items():
            for family, stats in evaluation.by_family.items():
                self.families.setdefault(family, {})[phase] = FamilyRow(
                    reward=stats.reward,
                    tool_calls=stats.tool_calls_per_rollout,
                    turns=stats.turns_per_rollout,
                )

    def _pair_phases(self) -> None:
        subsets: dict[str, list[str] | None] = {"all": None}
        if self.demonstrated_families:
            subsets["demonstrated"] = self.demonstrated_families
        if self.rl_families:
            subsets["rl_families"] = self.rl_families
        for family in [*self.demonstrated_families, *self.rl_families]:
            subsets[family] = [family]
        self.gains = {}
        metrics: tuple[Metric, ...] = ("sample", "greedy", "pass")
        for name, before, after in PHASE_GAINS:
            if before not in self.evaluations or after not in self.evaluations:
                continue
            old, new = self.evaluations[before], self.evaluations[after]
            for metric in metrics:
                prefix = {"sample": "", "greedy": "greedy:", "pass": f"pass@{new.pass_k}:"}[metric]
                for subset, families in subsets.items():
                    if old.measures(metric, families) and new.measures(metric, families):
                        self.gains[f"{prefix}{name}:{subset}"] = paired_gain(old, new, families, metric)

    def _forgetting_check_power(self) -> None:
        sft = self.evaluations.get("sft")
        self.forgetting_check_power = {}
        for family in self.demonstrated_families if sft is not None else []:
            rewards = [r for r in sft.family_rewards([family]) if r is not None]
            if rewards:
                rate = sum(rewards) / len(rewards)
                self.forgetting_check_power[family] = {
                    "tasks": len(rewards),
                    "sft_reward": round(rate, 4),
                    "smallest_flagged_drop": smallest_flagged_drop(len(rewards), rate),
                }

    def _checks(self) -> dict[str, bool]:
        rl = self.gains.get("rl_over_sft:rl_families")
        demonstrations = self.gains.get("sft_over_base:demonstrated")
        grpo = self.evaluations.get("grpo")
        mismatches = [s["mismatch"]["mean_abs_diff"] for s in self.grpo_steps if "mismatch" in s]
        bound = self.config.get("max_staleness")
        checks = {
            "rl_over_its_start_on_families_without_demonstrations_at_least_0.10": rl is not None
            and rl.mean >= MIN_RL_GAIN,
            "rl_over_its_start_on_families_without_demonstrations_interval_above_zero": rl is not None
            and rl.low > 0,
            "no_demonstrated_family_falls_under_rl_beyond_its_interval": all(
                (g := self.gains.get(f"rl_over_sft:{family}")) is not None and g.high >= 0
                for family in self.demonstrated_families
            ),
            "rl_policy_calls_a_tool_per_rollout": grpo is not None
            and grpo.stats.tool_calls_per_rollout >= MIN_TOOL_CALLS,
            "mismatch_at_most_1e-3_every_step": bool(mismatches)
            and all(not math.isnan(m) and m <= MAX_MISMATCH for m in mismatches),
            # A flag does not excuse a stale rollout: the run's bound must hold.
            "staleness_within_bound_every_step": bool(self.grpo_steps)
            and all(
                s.get("staleness") is not None
                and (bound is None or max(s["staleness"], s.get("staleness_at_update") or 0) <= bound)
                for s in self.grpo_steps
            ),
            # Each rollout, not each step's union: a step reports how many recorded none.
            "every_rollout_records_its_versions": bool(self.grpo_steps)
            and all(s.get("policy_versions") and s.get("unversioned", 1) == 0 for s in self.grpo_steps),
            # Greedy and pass@k are measurement beside the run (their own `measure_*` seconds).
            "run_within_60_min_besides_greedy_and_pass_at_k": self.total_seconds - self.measure_seconds
            <= MAX_MINUTES * 60,
        }
        if self.demonstrated_families:
            checks["demonstrations_over_base_on_demonstrated_families_interval_above_zero"] = (
                demonstrations is not None and demonstrations.low > 0
            )
        return checks

    @property
    def skipped_steps(self) -> list[int]:
        """The GRPO steps with no group that could teach: trained nothing, published no version."""
        return [int(s["step"]) for s in self.grpo_steps if s.get("skipped")]

    @property
    def measure_seconds(self) -> float:
        return sum(v for k, v in self.seconds.items() if k.startswith("measure_"))

    def summary(self) -> str:
        parts = []
        for phase in ("base", "sft", "grpo"):
            if phase in self.evaluations:
                r = self.evaluations[phase].stats
                parts.append(f"{phase} {r.reward.text()}, {r.tool_calls_per_rollout:.2f} tool calls")
        credited = (
            ("demonstrations (SFT over base, demonstrated families)", "sft_over_base:demonstrated"),
            ("RL (GRPO over SFT, families without demonstrations)", "rl_over_sft:rl_families"),
            (
                "GRPO on the demonstrated families (rehearsal guided by demonstrations)"
                if self.grpo_guides.get("guided")
                else "RL on the demonstrated families",
                "rl_over_sft:demonstrated",
            ),
        )
        for label, key in credited:
            if key in self.gains:
                parts.append(f"{label} {self.gains[key].text(signed=True)}")
        # RL's gain in the greedy sample and in pass@k beside the first sample's: how much is sharpening.
        for key, gain in self.gains.items():
            metric, _, rest = key.partition(":")
            if rest == "rl_over_sft:rl_families":
                parts.append(f"RL ({metric}) {gain.text(signed=True)}")
        if self.skipped_steps:
            parts.append(
                f"{len(self.skipped_steps)} of {len(self.grpo_steps)} GRPO steps had no group to teach "
                f"(steps {self.skipped_steps}: trainer skipped, no version published)"
            )
        measured = (
            f" ({self.measure_seconds / 60:.1f} of them greedy and pass@k)" if self.measure_seconds else ""
        )
        parts.append(f"{self.total_seconds / 60:.1f} min{measured}")
        return f"held-out reward ({self.heldout.get('set', 'tuning')} set): " + "; ".join(parts)

    def family_lines(self) -> list[str]:
        """One line per family: each phase's reward, tool calls and turns, and RL's gain on it."""
        lines = []
        for family, phases in self.families.items():
            kind = "demonstrated" if family in self.demonstrated_families else "no demonstrations"
            cells = [
                f"{phase} {row.reward.mean:.2f} ({row.tool_calls:.2f} calls, {row.turns:.2f} turns)"
                for phase, row in phases.items()
            ]
            gain = self.gains.get(f"rl_over_sft:{family}")
            if gain is not None:
                cells.append(f"RL {gain.text(signed=True)}")
            lines.append(f"{family} ({kind}): " + "; ".join(cells))
        return lines


def write_results(
    report: TrainReport, name: str, command: str, results_dir: Path | None = None
) -> tuple[Path, Path]:
    """`<results_dir>/<name>.json` (provenance included, with the `command` that reruns it) and `<name>.png`."""
    out = results_dir or results_dir_default()
    path = record(
        name,
        report.model_dump(mode="json"),
        simulated=[],
        ours="GRPO through the service (TRL + PEFT LoRA on CPU), from the SFT policy of program-written "
        "demonstrations; every evaluated policy served as merged weights",
        against="the policy each phase started from (SFT: the base model; GRPO: the SFT policy), on the same "
        "held-out tasks and sampling; RL's gain on families no demonstration shows",
        measured=report.summary(),
        command=command,
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
    groups = [("demonstrated", report.demonstrated_families), ("no demonstrations", report.rl_families)]
    groups = [(label, families) for label, families in groups if families]
    width = 0.8 / max(len(phases), 1)
    colors = {"base": "tab:gray", "sft": "tab:blue", "grpo": "tab:green"}
    for i, phase in enumerate(phases):
        evaluation = report.evaluations[phase]
        cells = [
            Interval.of([r for r in evaluation.family_rewards(families) if r is not None])
            for _, families in groups
        ]
        xs = [g + (i - (len(phases) - 1) / 2) * width for g in range(len(groups))]
        eval_ax.bar(
            xs,
            [c.mean for c in cells],
            width,
            yerr=[[c.mean - c.low for c in cells], [c.high - c.mean for c in cells]],
            capsize=4,
            color=colors[phase],
            label=phase,
        )
    eval_ax.set_xticks(range(len(groups)), [f"{label} families" for label, _ in groups])
    eval_ax.legend(loc="upper right")
    eval_ax.set_title("held-out reward by phase (95% Wilson intervals)")
    eval_ax.set_ylim(0, 1.05)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
