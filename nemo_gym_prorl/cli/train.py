# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""`prorl train`: cold start from program-written demonstrations, then GRPO through the rollout
service, with held-out evaluations of the base, SFT and GRPO policies."""

from __future__ import annotations

import argparse
import shlex
import sys

from nemo_gym_prorl.cli.failure import failed, load_or_stop


def _train(args: argparse.Namespace) -> int:
    from nemo_gym_prorl.demo.shutdown import Interrupted, StopOnSignals
    from nemo_gym_prorl.llm.embedded import ServerStartError
    from nemo_gym_prorl.service.config import ConfigError
    from nemo_gym_prorl.training.config import TrainConfigError, load_train_config
    from nemo_gym_prorl.training.loop import run_training
    from nemo_gym_prorl.training.report import write_results
    from nemo_gym_prorl.training.trainer_process import TrainerFailed

    config = load_or_stop(
        "train", lambda: load_train_config(args.config, args.overrides), TrainConfigError,
        print_config=args.print_config,
    )  # fmt: skip
    if isinstance(config, int):
        return config
    if config.record:  # refused on a dirty tree before the run, not after it
        from nemo_gym_prorl.provenance import DirtyTreeError, check_recordable

        try:
            check_recordable(allow_dirty=args.allow_dirty)
        except DirtyTreeError as exc:
            return failed("train", exc)
    try:
        with StopOnSignals("{signal}: already stopping everything the training run started") as signals:
            report = signals.run(run_training(config))
    except Interrupted as stop:
        print(f"prorl train: stopped by {stop.name}; everything it started is stopped", file=sys.stderr)
        return stop.exit_code
    except (TrainerFailed, ConfigError, ServerStartError) as exc:
        return failed("train", exc, 1)
    print(f"[train] {report.summary()}")
    for check, ok in report.checks.items():
        print(f"[train] {'ok  ' if ok else 'MISS'} {check}")
    if config.record:
        json_path, png = write_results(report, config.name, command=train_command(args))
        print(f"[train] results: {json_path}, {png}")
    return 0


def train_command(args: argparse.Namespace) -> str:
    """The command line that reruns this run, as a results file records it."""
    config = [] if args.config == "default" else ["--config", args.config]
    return shlex.join(["prorl", "train", *config, *args.overrides])


def add_train_parser(subparsers: argparse._SubParsersAction) -> None:
    train = subparsers.add_parser(
        "train",
        help="SFT on demonstrations, then GRPO through the service; held-out evaluation",
        description=__doc__,
    )
    train.add_argument(
        "overrides", nargs="*", help="dotted overrides, e.g. grpo.steps=4 sampling.max_tokens=96"
    )
    train.add_argument(
        "--config", default="default", help="configs/train/<name>.yaml, or a path (default: default)"
    )
    train.add_argument("--print-config", action="store_true", help="print the validated config and exit")
    train.add_argument("--allow-dirty", action="store_true",
                       help="record the results even with uncommitted changes (the file says so)")  # fmt: skip
    train.set_defaults(func=_train)
