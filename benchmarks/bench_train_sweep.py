# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""`prorl bench train_sweep`: what each recorded `prorl train` run was set to, and what it gave.

Every version of `benchmarks/results/train.json` in this checkout's git history is one run of the
default config of its day, recorded with its own commit and machine. This collects them side by
side: the settings that differ between runs (GRPO steps, prompts, rehearsal, KL, learning rate,
tool prompt, tool output), each phase's held-out reward, the paired gains credited to RL and to
the demonstrations, the checks and the wall clock. Nothing is run again and nothing is
simulated: every figure is the one its run recorded (older runs recorded fewer of them).
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

import provenance  # first: it notes the load average the run starts under
from nemo_gym_prorl.assets import project_root

RESULTS = "benchmarks/results/train.json"
SIMULATED: list[str] = []


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=project_root(), capture_output=True, text=True, check=True
    ).stdout


def _get(data: dict[str, Any], *path: str) -> Any:
    for key in path:
        if not isinstance(data, dict):
            return None
        data = data.get(key)  # type: ignore[assignment]
    return data


def _override(overrides: list[str] | None, prefix: str) -> str | None:
    for item in overrides or []:
        if prefix in item:
            return item.split("=", 1)[1]
    return None


def run_of(data: dict[str, Any], recorded_in: str) -> dict[str, Any]:
    """One recorded run: its settings, rewards, gains, checks and minutes."""
    figures = data["figures"]
    config = figures.get("config") or {}
    grpo = config.get("grpo") or {}
    gains = figures.get("gains") or {}
    rollout_s = [s["rollout_s"] for s in figures.get("grpo_steps") or [] if s.get("rollout_s") is not None]
    rewards = {
        phase: _get(evaluation, "stats", "reward", "mean")
        for phase, evaluation in (figures.get("evaluations") or {}).items()
    }
    return {
        "commit": data["commit"]["sha"][:8],
        "recorded_in": recorded_in,
        "measured_at": data.get("measured_at"),
        "machine": f"{data['machine']['cores']} cores, {data['machine']['cpu_model']}",
        # Runs before the test set existed evaluated the tuning set (seeds from 1,000,000).
        "heldout_set": _get(figures, "heldout", "set") or "tuning",
        "settings": {
            "grpo_steps": grpo.get("steps"),
            "prompts_per_step": grpo.get("prompts_per_step"),
            "num_generations": grpo.get("num_generations"),
            "rehearsal": grpo.get("rehearsal", 0),
            "guide_rehearsal": bool(grpo.get("guide_rehearsal", False)),  # older runs: unguided
            "beta": grpo.get("beta"),
            "learning_rate": _get(grpo, "optimizer", "learning_rate"),
            "micro_batch": _get(grpo, "optimizer", "batch_size"),
            "tool_prompt": config.get("tool_prompt") or "system",
            "tool_output_bytes": _override(config.get("service_overrides"), "max_output_bytes"),
            "rl_families": _get(config, "split", "rl_families") or [],
            "publish_as": grpo.get("publish_as", "adapter"),  # older runs published adapters
        },
        "reward": rewards,
        "gains": {
            name: {k: gain[k] for k in ("mean", "low", "high")}
            for name, gain in gains.items()
            if name.partition(":")[2] in ("all", "demonstrated", "rl_families")
        },
        "worst_demonstrated_family": worst_demonstrated_family(figures),
        "checks": figures.get("checks") or {},
        "minutes": round(figures["total_seconds"] / 60, 1) if figures.get("total_seconds") else None,
        "grpo_minutes": round(grpo_s / 60, 1) if (grpo_s := _get(figures, "seconds", "grpo")) else None,
        "rollout_s_per_step": round(sum(rollout_s) / len(rollout_s), 1) if rollout_s else None,
    }


def worst_demonstrated_family(figures: dict[str, Any]) -> dict[str, Any] | None:
    """The demonstrated family RL moved most downward (what forgetting looks like), with its gain."""
    gains = figures.get("gains") or {}
    moved = [
        {"family": family, **{k: gain[k] for k in ("mean", "low", "high")}}
        for family in figures.get("demonstrated_families") or []
        if (gain := gains.get(f"rl_over_sft:{family}")) is not None
    ]
    return min(moved, key=lambda g: g["mean"]) if moved else None


def _worst(run: dict[str, Any]) -> str:
    worst = run["worst_demonstrated_family"]
    if worst is None:
        return "-"
    return f"{worst['family']} {worst['mean']:+.2f} [{worst['low']:+.2f}, {worst['high']:+.2f}]"


def recorded_runs() -> list[dict[str, Any]]:
    """Every committed version of the results file, oldest first."""
    runs = []
    for sha in reversed(_git("log", "--format=%H", "--", RESULTS).split()):
        try:
            data = json.loads(_git("show", f"{sha}:{RESULTS}"))
        except (subprocess.CalledProcessError, json.JSONDecodeError):
            continue  # the commit removed or broke it: no run to read
        runs.append(run_of(data, sha[:8]))
    return runs


def _gain(run: dict[str, Any], name: str) -> str:
    gain = run["gains"].get(name)
    return "-" if gain is None else f"{gain['mean']:+.2f} [{gain['low']:+.2f}, {gain['high']:+.2f}]"


def render(figures: dict[str, Any]) -> str:
    lines = []
    for run in figures["runs"]:
        s = run["settings"]
        rewards = ", ".join(
            f"{phase} {value:.2f}" for phase, value in run["reward"].items() if value is not None
        )
        lines += [
            f"{run['commit']} ({run['measured_at'] or '?'}, {run['machine']}): {run['minutes']} min, GRPO "
            f"{run['grpo_minutes']} min, rollouts {run['rollout_s_per_step']} s a step on the published "
            f"{s['publish_as']}",
            f"  GRPO {s['grpo_steps']} steps x {s['prompts_per_step']} prompts x {s['num_generations']}, rehearsal "
            f"{s['rehearsal'] or 0}{' guided' if s['guide_rehearsal'] else ''}, beta {s['beta']}, lr {s['learning_rate']}, micro-batch {s['micro_batch']}, "
            f"tools via {s['tool_prompt']}, tool output {s['tool_output_bytes'] or 'default'} bytes",
            f"  held-out reward ({run['heldout_set']} set): {rewards}",
            f"  RL over SFT: RL families {_gain(run, 'rl_over_sft:rl_families')}, "
            f"demonstrated {_gain(run, 'rl_over_sft:demonstrated')}, its worst family {_worst(run)}",
        ]
    return "\n".join(lines)


def summary(figures: dict[str, Any]) -> str:
    parts = []
    for run in figures["runs"]:
        s = run["settings"]
        if "rl_over_sft:rl_families" not in run["gains"]:
            continue
        parts.append(
            f"rehearsal {s['rehearsal'] or 0}{' guided' if s['guide_rehearsal'] else ''}, beta {s['beta']}, "
            f"published as {s['publish_as']}: RL families {_gain(run, 'rl_over_sft:rl_families')}, demonstrated "
            f"{_gain(run, 'rl_over_sft:demonstrated')} (worst family {_worst(run)}), "
            f"{run['minutes']} min, {run['heldout_set']} set ({run['commit']})"
        )
    return f"{len(figures['runs'])} recorded runs; " + "; ".join(parts)


main = provenance.Benchmark(
    "train_sweep", lambda say: {"runs": recorded_runs()}, render, summary, SIMULATED,
    ours="every recorded `prorl train` run of the default config (git history of train.json)",
    against="each other: the settings each run changed (steps, prompts, rehearsal, KL, learning rate)",
).main  # fmt: skip
