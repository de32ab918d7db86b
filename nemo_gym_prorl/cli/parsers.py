# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Argument-parser pieces more than one command group uses."""

from __future__ import annotations

import argparse
from collections.abc import Callable

Command = Callable[[argparse.Namespace], int]


def add_group_with_setup(
    subparsers: argparse._SubParsersAction,  # type: ignore[type-arg]
    name: str,
    *,
    help: str,
    setup: tuple[Command, str, str],
) -> tuple[argparse.ArgumentParser, argparse._SubParsersAction]:  # type: ignore[type-arg]
    """`prorl <name> ...`, a group whose `setup [--force]` builds what the group runs: idempotent,
    `--force` redoes it. `setup` is (command, its help, --force's help). Returns the group and its
    subcommands, for the group's other commands."""
    group = subparsers.add_parser(name, help=help)
    sub = group.add_subparsers(dest=f"{name}_command", required=True)
    func, setup_help, force_help = setup
    p_setup = sub.add_parser("setup", help=setup_help)
    p_setup.add_argument("--force", action="store_true", help=force_help)
    p_setup.set_defaults(func=func)
    return group, sub
