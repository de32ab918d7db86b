# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""What the demo shows a newcomer: a per-domain summary, the trajectories a trainer would get,
and a picture of the stages overlapping in time."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from nemo_gym_prorl.pipeline.groups import GroupResult
from nemo_gym_prorl.pipeline.job import JobResult

STAGE_COLOURS = {"queue": "#d9d9d9", "init": "#4c72b0", "run": "#dd8452", "eval": "#55a868"}


@dataclass
class Rollout:
    domain: str
    informative_group: bool
    result: JobResult
    row: Mapping[str, Any]

    @property
    def generated_tokens(self) -> int:
        return self.result.trajectory.generated_tokens if self.result.trajectory else 0


def rollouts_of(groups: Iterable[tuple[GroupResult, bool]], domain_of: Mapping[str, str]) -> list[Rollout]:
    """Flatten judged groups (with whether each was informative) into rollouts."""
    out = []
    for group, informative in groups:
        source = str(group.row.get("data_source", "?"))
        domain = domain_of.get(source, source)
        out.extend(Rollout(domain, informative, sample, group.row) for sample in group.samples)
    return out


def write_jsonl(path: Path, records: Iterable[Mapping[str, Any]]) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with path.open("w") as fh:
        for record in records:
            fh.write(json.dumps(record) + "\n")
            count += 1
    return count


def stage_spans(result: JobResult) -> list[tuple[str, float, float]]:
    """(stage, start, end) in Unix seconds, rebuilt from the result's waits and stage times."""
    t = result.submitted_at
    spans = []
    timing = result.timing
    for stage in ("init", "run", "eval"):
        wait, active = getattr(timing, f"{stage}_wait"), getattr(timing, f"{stage}_time")
        if wait > 0:
            spans.append(("queue", t, t + wait))
        t += wait
        if active > 0:
            spans.append((stage, t, t + active))
        t += active
    return spans


def node_of(result: JobResult) -> str:
    """The node a rollout finished on (its last attempt), or `local` for the in-process executor."""
    return (result.attempts[-1].node if result.attempts else None) or "local"


def plot_timeline(
    rollouts: Sequence[Rollout], path: Path, colour_by: Literal["stage", "node"] = "stage"
) -> Path:
    """Each rollout a row of its INIT / RUN / EVAL spans (coloured by stage, or by the node
    it ran on); below, rollouts finished over time."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    finished = sorted((r for r in rollouts if r.result.finished_at), key=lambda r: r.result.submitted_at)
    if not finished:
        raise ValueError("no finished rollout to plot")
    t0 = min(r.result.submitted_at for r in finished)
    fig, (ax, ax2) = plt.subplots(
        2, 1, figsize=(11, 7), height_ratios=[3, 1], sharex=True, constrained_layout=True
    )
    colours = dict(STAGE_COLOURS)
    if colour_by == "node":
        nodes = sorted({node_of(r.result) for r in finished})
        palette = matplotlib.colormaps["tab10"]
        colours = {"queue": STAGE_COLOURS["queue"]} | {n[:8]: palette(i % 10) for i, n in enumerate(nodes)}
    for row, rollout in enumerate(finished):
        for stage, start, end in stage_spans(rollout.result):
            key = stage if colour_by == "stage" or stage == "queue" else node_of(rollout.result)[:8]
            ax.barh(row, end - start, left=start - t0, height=0.8, color=colours[key], linewidth=0)
    ax.set_yticks(range(len(finished)), [f"{r.domain} {i}" for i, r in enumerate(finished)], fontsize=5)
    ax.invert_yaxis()
    ax.set_ylabel("rollout")
    ax.set_title("Rollout stages over time: INIT, RUN and EVAL of different rollouts overlap")
    ax.legend(handles=[Patch(color=c, label=s) for s, c in colours.items()], loc="upper right")
    ends = sorted(r.result.finished_at - t0 for r in finished if r.result.finished_at)
    ax2.step(ends, range(1, len(ends) + 1), where="post", color="#333333")
    span = max(ends[-1], 1e-9)
    ax2.set_title(f"rollouts finished: {len(ends)} in {span:.0f} s ({len(ends) / span:.2f}/s)")
    ax2.set_xlabel("seconds since the first submission")
    ax2.set_ylabel("finished")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return path
