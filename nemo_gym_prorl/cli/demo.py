# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""`prorl demo`: the main job on the embedded defaults."""

from __future__ import annotations

import argparse
from pathlib import Path


def _demo(args: argparse.Namespace) -> int:
    from nemo_gym_prorl.demo import run_demo

    environments = [name for names in args.environment for name in names.split(",") if name]
    return run_demo(
        quick=args.quick,
        constrained=not args.unconstrained,
        policy=args.policy,
        environments=environments,
        harness=args.harness,
    )


def add_demo_parser(subparsers: argparse._SubParsersAction) -> None:
    demo = subparsers.add_parser("demo", help="the main job on the embedded defaults")
    demo.add_argument("--quick", action="store_true", help="a smaller run")
    demo.add_argument(
        "--unconstrained",
        action="store_true",
        help="no constrained tool calling: the tiny model on its own (it rarely calls a tool)",
    )
    demo.add_argument(
        "--policy",
        type=Path,
        default=None,
        metavar="DIR",
        help="serve this trained policy: a checkpoint (the weights-v* directory `prorl train` writes last) or a "
        "LoRA adapter of the embedded model; implies --unconstrained",
    )
    demo.add_argument(
        "--environment",
        action="append",
        default=[],
        metavar="NAME[,NAME...]",
        help="draw the rows from these dataset environments (`prorl data environments --list`): their prepared "
        "validation rows, else their example rows",
    )
    demo.add_argument(
        "--harness",
        default=None,
        metavar="NAME",
        help="an agent harness (mini_swe_agent, openai_agents), unchanged from PyPI, drives the rollouts of the generated SWE instances through "
        "the service's recording model endpoint (token-exact); implies --unconstrained",
    )
    demo.set_defaults(func=_demo)
