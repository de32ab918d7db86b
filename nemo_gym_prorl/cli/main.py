# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""`prorl`: one command line for the whole project.

Each command group is a module of this package (`bench`, `demo`, `model`, `serve`, `data`,
`gym`) with an `add_<group>_parser`. Subcommands import their implementation lazily, so
`prorl --help` is instant and a missing optional piece (say, vLLM on a login node) only matters
to the subcommand that needs it.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence

COMMAND_GROUPS = (
    "setup",
    "bench",
    "demo",
    "model",
    "serve",
    "train",
    "data",
    "gym",
    "nemo_rl",
    "sandbox",
    "show",
)


def _add_group(group: str, subparsers: argparse._SubParsersAction) -> None:
    module = f"nemo_gym_prorl.cli.{group}"
    try:
        add: Callable[[argparse._SubParsersAction], None] = getattr(
            importlib.import_module(module), f"add_{group}_parser"
        )
    except ImportError as exc:  # pragma: no cover - only when a dependency is missing
        print(f"prorl: {module} unavailable: {exc}", file=sys.stderr)
        return
    add(subparsers)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="prorl", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for group in COMMAND_GROUPS:
        _add_group(group, sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:
        # A flag between a command's name and its `-- OPTION...` (`prorl bench load --json -- ...`)
        # leaves argparse with the options unparsed: they are still the command's own.
        if extra[0] == "--" and getattr(args, "options", None) == []:
            args.options = extra[1:]
        else:
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
