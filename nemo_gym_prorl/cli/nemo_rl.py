# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""`prorl nemo-rl check CONFIG...`: would NeMo RL start this recipe? (no NeMo RL needed)"""

from __future__ import annotations

import argparse
from pathlib import Path


def _check(args: argparse.Namespace) -> int:
    from nemo_gym_prorl.integrations.nemo_rl.check import check_recipe

    failed = 0
    for config in args.config:
        try:
            report = check_recipe(config, nemo_rl=args.nemo_rl, runner=args.runner)
        except (OSError, ValueError) as exc:
            print(f"{config}: cannot be read: {exc}")
            failed += 1
            continue
        print(report.render())
        failed += not report.ok
    return 1 if failed else 0


def add_nemo_rl_parser(sub: argparse._SubParsersAction) -> None:
    group = sub.add_parser("nemo-rl", help="NeMo RL recipes: preflight checks")
    commands = group.add_subparsers(dest="nemo_rl_command", required=True)
    check = commands.add_parser(
        "check",
        help="validate recipes against NeMo RL's config schema, its runner's rules and this project's agent",
    )
    check.add_argument("config", nargs="+", type=Path, help="NeMo RL recipe YAML file(s)")
    check.add_argument(
        "--nemo-rl",
        type=Path,
        default=None,
        help="a NeMo RL checkout to read the schema from (default: the record)",
    )
    check.add_argument(
        "--runner",
        choices=("grpo", "single_controller"),
        default=None,
        help="default: detected from the recipe",
    )
    check.set_defaults(func=_check)
