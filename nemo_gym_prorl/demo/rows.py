# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""What the demo runs: its rows (the resources servers' examples, dataset environments, a
trained policy's held-out tasks, generated SWE instances for a harness) and the Gym agent's
overrides that go with them.

The 135M model cannot hold a tool-call format on its own, so by default its tool calls are
constrained (a vLLM structural tag built from each task's tools, `llm.constrained` below): it
must call a working tool on its first two turns, may answer from the third, and must answer on
the fourth, in the format its domain's evaluator reads. The calls run for real in the
sandboxes and the rewards are the evaluators' own. `--unconstrained` shows the model alone.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from nemo_gym_prorl.assets import project_root, resources_server_dir
from nemo_gym_prorl.datasets.environment_files import EXAMPLE, environment_dir
from nemo_gym_prorl.datasets.prepare import split_path
from nemo_gym_prorl.datasets.rows import read_jsonl
from nemo_gym_prorl.demo.console import say

DOMAINS = ("math", "stem", "code", "swe")
_AGENT = "++prorl_agent.responses_api_agents.prorl_agent"
# Constrained tool calling (see nemo_gym_prorl/llm/dialects/structured.py): two tool turns, then
# the answer may come, and must come on the fourth turn. `max_turns` bounds the domains whose
# answer has no format (SWE: the patch is the answer), where the last turns are left free.
CONSTRAINED_OVERRIDES = (
    f"{_AGENT}.llm.constrained.enabled=true",
    f"{_AGENT}.llm.constrained.tool_turns=2",
    f"{_AGENT}.llm.constrained.answer_turn=3",
    f"{_AGENT}.agent.max_turns=6",
)

# Every rollout ends within the demo's few minutes: the loop stops generating after
# `agent.max_time_s` and the rollout is graded as it stands; past the active-time budget the
# pipeline ends it as a timeout, whatever it was waiting on.
TIME_BUDGET_OVERRIDES = (f"{_AGENT}.agent.max_time_s=150", f"{_AGENT}.pipeline.active_time_s=240")


def demo_rows(environments: Sequence[str] = ()) -> list[dict[str, Any]]:
    """The example rows each resources server ships (real data), SWE kept small: its EVAL runs a
    project's test suite. With `environments`, those dataset environments' rows instead: their
    prepared validation rows (`prorl data prepare --environment NAME`), else their example rows."""
    per_domain = {"math": 2, "stem": 2, "code": 2, "swe": 1}
    if environments:
        return [row for name in environments for row in environment_rows(name, per_domain)]
    rows: list[dict[str, Any]] = []
    for domain in DOMAINS:
        path = resources_server_dir(f"prorl_{domain}") / "data" / "example.jsonl"
        rows += read_jsonl(path)[: per_domain[domain]]
    return rows


def harness_rows(quick: bool) -> list[dict[str, Any]]:
    """The generated SWE instances' rows, which a harness drives (mini-swe-agent is a SWE agent)."""
    path = resources_server_dir("prorl_swe") / "data" / "example.jsonl"
    return read_jsonl(path)[: 1 if quick else 2]


def harness_overrides(name: str, max_turns: int) -> list[str]:
    """The Gym agent's RUN handed to a harness: its model calls through the recording endpoint,
    its commands through the SWE server's /exec, its step limit lowered to `max_turns`."""
    return [f"{_AGENT}.harness={{name:{name}}}", f"{_AGENT}.agent.max_turns={max_turns}"]


def as_trained(policy: Path, rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """A `prorl train` policy is shown the way it was trained: its prompts offer the tools as its
    training's did, and the math rows are its run's held-out tasks, one of each demonstrated
    family and two of each RL family (which no demonstration taught). Other domains stay."""
    from nemo_gym_prorl.datasets.domain_tools import responses_tools
    from nemo_gym_prorl.training.heldout import SeedSplit
    from nemo_gym_prorl.training.loop import read_policy_settings

    settings = read_policy_settings(policy)
    if not settings:
        say(
            f"{policy.parent} has no training settings (not a `prorl train` run): the demo's own rows and prompts"
        )
        return rows, []
    split = SeedSplit.model_validate(settings["split"])
    heldout = split.heldout_rows()
    rl = heldout[split.heldout_size :][: 2 * len(split.rl_families)]
    # `prorl train` offered the math domain's tools to rows that name none; a Gym agent offers
    # only the tools a row declares, so the rows declare the same ones here.
    tools = responses_tools("math")
    math = [
        {**row, "responses_create_params": {**row["responses_create_params"], "tools": tools}}
        for row in heldout[: len(split.families)] + rl
    ]
    say(
        f"math rows: {len(math)} held-out tasks of the policy's run ({', '.join(split.family(r) for r in math)})"
    )
    overrides = [f"{_AGENT}.llm.tool_prompt={settings['tool_prompt']}"]
    if settings.get("harness"):
        # Trained through a harness: shown through it, with its options, on its run's math tasks.
        options = ",".join(f"{k}:{json.dumps(v)}" for k, v in settings["harness"].items())
        overrides += [f"{_AGENT}.harness={{{options}}}", f"{_AGENT}.agent.max_turns=3"]
        say(f"the policy was trained through {settings['harness']['name']}: its rollouts run through it")
        return math, overrides
    others = [row for row in rows if row["data_source"] != "prorl_math"]
    return math + others, overrides


def environment_rows(name: str, per_domain: Mapping[str, int]) -> list[dict[str, Any]]:
    from nemo_gym_prorl.datasets.environments import environment  # the converters: only when asked

    env = environment(name)
    prepared = split_path(name, "validation")
    path = prepared if prepared.is_file() else environment_dir(project_root(), env) / EXAMPLE
    say(f"{name}: rows from {path}")
    return read_jsonl(path)[: per_domain[env.domain]]
