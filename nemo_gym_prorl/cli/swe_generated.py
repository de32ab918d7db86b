# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""`prorl swe build --generate` and `prorl swe verify`: generated SWE instances.

prorl swe build --generate [--projects N] [--only NAME ...] [--per-project K] [--workers W] [--seed S]
    mutate the projects of projects.json, keep the validated bugs; report per project and stage
prorl swe verify [--generated] [--limit N] [--workers W]
    through the real EVAL path: gold resolves, empty does not, the base fails exactly FAIL_TO_PASS
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from nemo_gym_prorl.tasks.swe.config import SweConfig


def _config(args: argparse.Namespace) -> SweConfig:
    return SweConfig(cache_dir=Path(args.cache_dir)) if args.cache_dir else SweConfig()


def generate_command(args: argparse.Namespace) -> int:
    from nemo_gym_prorl.tasks.swe.generate import GenerateOptions, generate

    options = GenerateOptions(projects=args.projects, only=args.only_projects or None, seed=args.seed,
                              per_project=args.per_project, **({"workers": args.workers} if args.workers else {}))  # fmt: skip
    try:
        report = asyncio.run(generate(_config(args), options, say=lambda m: print(m, flush=True)))
    except Exception as exc:
        print(f"prorl swe build --generate: {exc}", file=sys.stderr)
        return 1
    print(f"{'project':<16}{'functions':>10}{'sites':>8}{'candidates':>12}{'kept':>6}{'total':>7}  outcomes")
    for p in report.projects:
        outcomes = ", ".join(f"{k} {v}" for k, v in sorted(p.outcomes.items()))
        print(f"{p.project:<16}{p.functions:>10}{p.sites:>8}{p.candidates:>12}{p.kept:>6}"
              f"{p.kept + p.kept_before:>7}  {outcomes or p.note or '(quota already met)'}")  # fmt: skip
    stages = ", ".join(f"{k} {v:.1f} s" for k, v in report.stages.items())
    print(f"projects: {len(report.projects)}, candidates: {report.candidates}, kept: {report.kept} "
          f"(total {report.total}); stages: {stages}; {report.seconds:.1f} s in all")  # fmt: skip
    print(f"instances: {report.instances_path}")
    return 0


def verify_command(args: argparse.Namespace) -> int:
    from nemo_gym_prorl.tasks.swe.build import load_instances
    from nemo_gym_prorl.tasks.swe.store import load_generated
    from nemo_gym_prorl.tasks.swe.verify import verify_instances

    config = _config(args)
    rows = load_generated(config) if args.generated else load_instances(config)
    rows = rows[: args.limit] if args.limit else rows
    if not rows:
        what = "generated (prorl swe build --generate)" if args.generated else "built (prorl swe build)"
        print(f"prorl swe verify: no {what} instances in {config.cache_dir}", file=sys.stderr)
        return 1
    report = asyncio.run(verify_instances(config, rows, args.workers, say=lambda m: print(m, flush=True)))
    print(f"instances: {report.instances}, gold resolves: {report.gold_resolved}, empty does not: "
          f"{report.empty_unresolved}, base fails exactly FAIL_TO_PASS: {report.base_exact}; "
          f"all three: {report.ok}/{report.instances} in {report.seconds:.1f} s")  # fmt: skip
    return 0 if report.ok == report.instances else 1


def add_generate_arguments(build: argparse.ArgumentParser) -> None:
    build.add_argument("--generate", action="store_true", help="procedural instances (AST mutations)")
    build.add_argument("--projects", type=int, help="--generate: the first N projects of projects.json")
    build.add_argument("--only-projects", nargs="*", help="--generate: these projects")
    build.add_argument("--per-project", type=int, default=20, help="--generate: instances per project")
    build.add_argument("--workers", type=int, help="--generate: concurrent sandboxes (default: CPUs)")
    build.add_argument("--seed", type=int, default=0, help="--generate: the candidates' order")


def add_verify_parser(swe_sub: argparse._SubParsersAction) -> None:
    verify = swe_sub.add_parser("verify", help="gold resolves, empty does not, through the real EVAL path")
    verify.add_argument("--generated", action="store_true", help="the generated instances (default: built)")
    verify.add_argument("--limit", type=int, help="the first N instances only")
    verify.add_argument("--workers", type=int, help="concurrent evaluations (default: CPUs)")
    verify.add_argument("--cache-dir", help="default ${PRORL_HOME:-~/.cache/prorl}/swe")
    verify.set_defaults(func=verify_command)
