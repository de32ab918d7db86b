# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Draws docs/images/architecture.png, the README's architecture picture (the source of it).

    .venv/bin/python docs/images/architecture.py

Boxes are the project's parts, arrows what flows between them. matplotlib only (`dot` is not
installed everywhere); the output is deterministic for one matplotlib version.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

OUT = Path(__file__).with_name("architecture.png")

# colours by kind: who trains, the service, its stages, what runs the policy's actions, the model
TRAINER, SERVICE, STAGE, SANDBOX, MODEL, HARNESS = (
    "#dbe9f6",
    "#fde9c8",
    "#fff6e3",
    "#dff2df",
    "#eadff2",
    "#f6dede",
)


def box(ax, x, y, w, h, title, body="", colour="#ffffff", size=10):
    ax.add_patch(
        FancyBboxPatch(
            (x, y), w, h, boxstyle="round,pad=0.02,rounding_size=0.12", fc=colour, ec="#444444", lw=1.1
        )
    )
    ax.text(x + w / 2, y + h - 0.16, title, ha="center", va="top", fontsize=size, weight="bold")
    if body:
        ax.text(x + w / 2, y + h - 0.48, body, ha="center", va="top", fontsize=size - 2, linespacing=1.35)


def arrow(ax, start, end, label="", both=False, offset=(0.0, 0.12), style="-|>", rad=0.0, colour="#333333"):
    ax.add_patch(
        FancyArrowPatch(
            start,
            end,
            arrowstyle=("<|-|>" if both else style),
            mutation_scale=13,
            lw=1.2,
            color=colour,
            connectionstyle=f"arc3,rad={rad}",
        )
    )
    if label:
        mx, my = (start[0] + end[0]) / 2 + offset[0], (start[1] + end[1]) / 2 + offset[1]
        ax.text(
            mx,
            my,
            label,
            ha="center",
            va="bottom",
            fontsize=7.5,
            color="#222222",
            bbox={"fc": "white", "ec": "none", "alpha": 0.85, "pad": 1.0},
        )


def main() -> None:
    fig, ax = plt.subplots(figsize=(13, 7.6))
    ax.set_xlim(0, 13)
    ax.set_ylim(0, 7.6)
    ax.axis("off")

    # the trainer
    box(
        ax,
        0.1,
        5.2,
        3.1,
        2.1,
        "Trainer",
        "NeMo RL GRPO/DAPO recipes\n(GPU cluster; refits its own vLLM)\nor TRL + PEFT on CPU:\n`prorl train`",
        TRAINER,
    )

    # the service, with its doors
    box(ax, 4.0, 2.55, 5.7, 4.85, "HTTP rollout service", "", SERVICE, size=11)
    ax.text(
        6.85,
        7.0,
        "`prorl serve`  |  NeMo Gym 0.7: environment server -> `prorl_agent`\n"
        "/v1/rollouts  /v1/batches  /v1/policy  ProRL's /process\n"
        "bounded queues, priorities, budgets, cancellation; in process or on Ray",
        ha="center",
        va="top",
        fontsize=8,
        linespacing=1.35,
    )
    box(
        ax,
        4.2,
        4.95,
        3.3,
        1.15,
        "DAPO dynamic sampling",
        "B informative groups of G; a uniform\ngroup replaced at once; carry-over",
        STAGE,
        size=9,
    )
    box(
        ax,
        7.7,
        4.95,
        1.8,
        1.15,
        "Harness endpoint",
        "mini-swe-agent, OpenAI\nAgents SDK: recorded\ntoken-exact",
        HARNESS,
        size=8.5,
    )
    for i, (name, body) in enumerate(
        [
            ("INIT pool", "sandbox, task\nworkspace"),
            ("RUN pool", "agent loop:\nmodel turns, tools"),
            ("EVAL pool", "grader in a\nfresh sandbox"),
        ]
    ):
        box(ax, 4.2 + i * 1.85, 3.05, 1.55, 1.35, name, body, STAGE, size=9)
    for i in range(2):
        arrow(ax, (5.75 + i * 1.85, 3.72), (6.05 + i * 1.85, 3.72))
    arrow(ax, (5.85, 4.95), (5.85, 4.6), "jobs", offset=(0.3, -0.12))
    arrow(ax, (7.6, 4.6), (8.3, 4.95), "or a harness", offset=(0.55, -0.22))

    # trainer <-> service
    arrow(ax, (3.2, 6.8), (4.0, 6.8), "jobs, batches,\npolicy versions", offset=(0.0, 0.06))
    arrow(ax, (4.0, 5.7), (3.2, 5.7), "trajectories:\ntoken ids,\nlog-probs, reward", offset=(0.0, -0.75))

    # sandboxes and tools
    box(
        ax,
        4.0,
        0.2,
        5.7,
        1.75,
        "Sandboxes: bubblewrap (rootless) or Apptainer",
        "no network, grader-free Python runtime, cgroup / rlimit limits\n"
        "tools inside: persistent PTY shell, IPython kernel, file editor\n"
        "(in process, or behind a NeMo Gym resources server)",
        SANDBOX,
        size=9,
    )
    arrow(ax, (4.97, 3.05), (4.97, 1.95))
    arrow(ax, (6.82, 3.05), (6.82, 1.95), "tool calls", offset=(0.42, -0.2))
    arrow(ax, (8.67, 3.05), (8.67, 1.95))

    # the LLM pool and backends
    box(
        ax,
        10.1,
        2.5,
        2.8,
        3.4,
        "LLM backend pool",
        "least in flight + sticky\nper trajectory; health checks,\nejection, re-routing\n\n"
        "token-in / token-out\n(`vllm`, `nemo_rl` dialects)\n\npolicies published to\nevery backend",
        MODEL,
        size=9.5,
    )
    box(
        ax,
        10.1,
        0.2,
        2.8,
        1.75,
        "vLLM backends",
        "embedded SmolLM2-135M on\nvLLM-CPU, your vLLM servers,\nor NeMo RL's policy workers",
        MODEL,
        size=9.5,
    )
    ax.add_patch(
        FancyArrowPatch(
            (7.3, 3.05),
            (10.1, 2.8),
            arrowstyle="-|>",
            mutation_scale=13,
            lw=1.2,
            color="#333333",
            connectionstyle="angle,angleA=-90,angleB=180,rad=0",
        )
    )
    ax.text(
        9.15,
        2.84,
        "model turns",
        ha="center",
        va="bottom",
        fontsize=7.5,
        bbox={"fc": "white", "ec": "none", "alpha": 0.85, "pad": 1.0},
    )
    arrow(ax, (9.5, 5.55), (10.1, 5.2))
    arrow(ax, (11.5, 2.5), (11.5, 1.95), both=True)

    # the entry points, named
    ax.text(
        1.65,
        4.7,
        "ways in:\nNeMo Gym (`ng_run`,\n`ng_collect_rollouts`)\nNeMo RL recipes\n"
        "`prorl train` (TRL)\n`prorl demo`",
        ha="center",
        va="top",
        fontsize=8.5,
        linespacing=1.4,
        color="#333333",
    )

    fig.savefig(OUT, dpi=130, bbox_inches="tight", facecolor="white")
    print(OUT)


if __name__ == "__main__":
    main()
