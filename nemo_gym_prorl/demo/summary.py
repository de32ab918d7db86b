# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The demo's per-domain summary, as data (`DomainSummary`) and as the table the terminal shows.

What a newcomer needs to see that the model acted: how many turns and tool calls each rollout
made (per tool), how many of those calls failed, why rollouts stopped, the rewards the real
evaluators gave, and how many DAPO groups were informative (kept for training).
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from nemo_gym_prorl.demo.report import Rollout
from nemo_gym_prorl.pipeline.groups import GroupResult
from nemo_gym_prorl.pipeline.job import JobState


@dataclass
class DomainSummary:
    """One domain's row of the summary (the HTML report renders the same objects)."""

    domain: str
    rollouts: int = 0
    done: int = 0
    mean_turns: float = 0.0
    tool_calls: dict[str, int] = field(default_factory=dict)  # executed calls per tool name
    tool_errors: int = 0
    stop_reasons: dict[str, int] = field(default_factory=dict)
    mean_reward: float = 0.0
    informative_groups: int = 0
    groups: int = 0
    constrained_rollouts: int = 0  # rollouts sampled under constrained decoding
    generated_tokens: int = 0

    @property
    def total_tool_calls(self) -> int:
        return sum(self.tool_calls.values())

    @property
    def mean_tool_calls(self) -> float:
        return self.total_tool_calls / self.rollouts if self.rollouts else 0.0


def summarize(
    rollouts: Sequence[Rollout], groups: Iterable[tuple[GroupResult, bool]], domain_of: Mapping[str, str]
) -> list[DomainSummary]:
    """Per-domain summaries, sorted by domain, plus an `all` row when there are several."""
    judged: dict[str, list[bool]] = defaultdict(list)
    for group, informative in groups:
        source = str(group.row.get("data_source", "?"))
        judged[domain_of.get(source, source)].append(informative)
    by_domain: dict[str, list[Rollout]] = defaultdict(list)
    for rollout in rollouts:
        by_domain[rollout.domain].append(rollout)
    out = [_summary(domain, by_domain[domain], judged.get(domain, [])) for domain in sorted(by_domain)]
    if len(out) > 1:
        out.append(_summary("all", list(rollouts), [flag for flags in judged.values() for flag in flags]))
    return out


def _summary(domain: str, items: list[Rollout], flags: list[bool]) -> DomainSummary:
    done = [r for r in items if r.result.state == JobState.DONE]
    rewards = [r.result.reward for r in done if r.result.reward is not None]
    tools: Counter[str] = Counter()
    stops: Counter[str] = Counter()
    errors = 0
    turns: list[int] = []
    constrained = 0
    for rollout in items:
        trajectory = rollout.result.trajectory
        steps = trajectory.steps if trajectory else []
        tools.update(str(s.get("name") or "?") for s in steps)
        errors += sum(1 for s in steps if s.get("is_error"))
        stops[(trajectory.stop_reason if trajectory else None) or rollout.result.state.value] += 1
        turns.append(trajectory.num_turns if trajectory else 0)
        constrained += bool(trajectory and trajectory.decoding)
    return DomainSummary(
        domain=domain,
        rollouts=len(items),
        done=len(done),
        mean_turns=statistics.fmean(turns) if turns else 0.0,
        tool_calls=dict(sorted(tools.items())),
        tool_errors=errors,
        stop_reasons=dict(stops.most_common()),
        mean_reward=statistics.fmean(rewards) if rewards else 0.0,
        informative_groups=sum(flags),
        groups=len(flags),
        constrained_rollouts=constrained,
        generated_tokens=sum(r.generated_tokens for r in items),
    )


def _counts(counts: Mapping[str, int]) -> str:
    return " ".join(f"{name}:{n}" for name, n in counts.items()) or "-"


def summary_table(summaries: Sequence[DomainSummary]) -> str:
    """The per-domain table for the terminal."""
    header = (
        f"{'domain':<6} {'rollouts':>8} {'turns':>5} {'calls':>5} {'errors':>6} {'reward':>6} "
        f"{'informative':>11}  {'tool calls per tool':<32} stop reasons"
    )
    lines = [header, "-" * (len(header) + 12)]
    for s in summaries:
        if s.domain == "all":
            lines.append("-" * (len(header) + 12))
        lines.append(
            f"{s.domain:<6} {s.rollouts:>8} {s.mean_turns:>5.2f} {s.mean_tool_calls:>5.2f} {s.tool_errors:>6} "
            f"{s.mean_reward:>6.3f} {f'{s.informative_groups}/{s.groups}':>11}  "
            f"{_counts(s.tool_calls):<32} {_counts(s.stop_reasons)}"
        )
    lines.append("turns, calls: mean per rollout; errors: tool calls that failed (all rollouts)")
    return "\n".join(lines)
