# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""`prorl serve`: compose the Hydra config, validate it, and run the rollout service (uvicorn).

Also runnable alone: `python -m nemo_gym_prorl.cli.serve [overrides...]`.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

from nemo_gym_prorl.cli.failure import failed, load_or_stop
from nemo_gym_prorl.service.config import ConfigError, ServeConfig, load_config
from nemo_gym_prorl.service.journal import JournalError

READY_PREFIX = "prorl serve: listening on "


def add_serve_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "serve",
        help="run the rollout service (HTTP API)",
        description="Run the rollout service. Configuration: configs/service/serve.yaml, composed "
        "with Hydra; pass overrides such as `sandbox=apptainer pipeline.run_workers=64 tasks=default`.",
    )
    _add_arguments(parser)
    parser.set_defaults(func=handle_serve)
    return parser


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("overrides", nargs="*", help="Hydra overrides (key=value, group=option, +new.key=v)")
    parser.add_argument("--config-dir", type=Path, default=None, help="directory holding serve.yaml")
    parser.add_argument("--print-config", action="store_true", help="print the validated config and exit")


def handle_serve(args: argparse.Namespace) -> int:
    config = load_or_stop(
        "serve",
        lambda: load_config(args.overrides, args.config_dir),
        ConfigError,
        print_config=args.print_config,
    )
    if isinstance(config, int):
        return config
    try:
        asyncio.run(serve(config))
    except (ConfigError, JournalError) as exc:
        return failed("serve", exc)
    except KeyboardInterrupt:
        pass
    return 0


async def serve(config: ServeConfig) -> None:
    """Build everything, serve until SIGINT/SIGTERM, then close every sandbox the jobs opened."""
    from nemo_gym_prorl.loop_monitor import freeze_startup_heap
    from nemo_gym_prorl.service.stack import serve_datasets, serve_durability, stack_from_config
    from nemo_gym_prorl.serving import serving

    # handlers built: a bad task config fails here
    stack = stack_from_config(config, durability=serve_durability(config))
    try:
        await stack.start()  # executor (Ray: one actor per node) and LLM pool, before listening
    except BaseException:
        await stack.close()
        raise
    app = stack.app(token=config.auth.resolved_token(), datasets=serve_datasets(config))
    freeze_startup_heap()
    try:
        async with serving(
            app, host=config.server.host, port=config.server.port, log_level=config.server.log_level
        ) as served:
            tasks = ", ".join(stack.pipeline.handlers.names()) or "(none)"
            print(f"{READY_PREFIX}{served.url} (tasks: {tasks})", flush=True)
            await served.wait()
    finally:
        await stack.close()  # already closed by the app's shutdown unless uvicorn never started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="prorl serve")
    _add_arguments(parser)
    return handle_serve(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
