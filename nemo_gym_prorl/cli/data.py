# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""`prorl data ...` and `prorl swe ...`: task data from installed packages, SWE instances from PyPI sdists.

prorl data prepare [--domain all|math|stem|code|swe] [--out DIR] [--validation-fraction F]
    train/validation JSONL in NeMo RL's Gym format (one row per task, task fields top level);
    SWE: the built instances and every generated one in the cache (`prorl swe build --generate`)
prorl data prepare --environment NAME [--source PATH_OR_HUB_ID] [--limit N] [--out DIR]
    a dataset environment's rows from its published records (`data/<name>/{train,validation}.jsonl`)
prorl data environments [--check | --list]
    write (or check, or list) environments/<name>/ of every dataset environment from the catalog
prorl data examples [--root DIR]
    regenerate each server's `data/example.jsonl` (5 real rows per domain)
prorl swe build [--only INSTANCE_ID ...]
    download the pinned sdists (pip, once), build the repositories and instances, validate
    FAIL_TO_PASS / PASS_TO_PASS in sandboxes; cache under ${PRORL_HOME:-~/.cache/prorl}/swe
prorl swe build --generate [--projects N] [--per-project K] [--workers W]
    hundreds of instances from AST mutations of projects.json's projects (see cli/swe_generated.py)
prorl swe verify [--generated]
    every instance through the real EVAL path: gold resolves, empty does not
prorl swe list
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from nemo_gym_prorl.assets import project_root
from nemo_gym_prorl.cli.failure import failed
from nemo_gym_prorl.cli.swe_generated import add_generate_arguments, add_verify_parser
from nemo_gym_prorl.datasets.domain_tools import responses_tools
from nemo_gym_prorl.datasets.rows import DEFAULT_AGENT, pick_examples, split_rows, write_jsonl

DOMAINS = ("math", "stem", "code", "swe")


def domain_rows(
    domain: str,
    agent: str = DEFAULT_AGENT,
    compact: bool = False,
    math_per_task: int = 4,
    swe_generated: bool = False,
) -> list[dict[str, Any]]:
    """The domain's rows from installed packages; SWE's from the offline instances, and with
    `swe_generated` those `prorl swe build --generate` cached too."""
    from nemo_gym_prorl.datasets import sources as data

    tools = responses_tools(domain)
    if domain == "math":
        return data.math_rows(size_per_task=math_per_task, agent=agent, tools=tools)
    if domain == "stem":
        return data.stem_rows(agent=agent, tools=tools)
    if domain == "code":
        return data.code_rows(agent=agent, tools=tools)
    from nemo_gym_prorl.datasets.swe import swe_rows
    from nemo_gym_prorl.tasks.swe import ensure_built
    from nemo_gym_prorl.tasks.swe.store import load_generated

    instances = asyncio.run(ensure_built())
    if swe_generated:
        generated = load_generated()
        print(f"swe: {len(instances)} built and {len(generated)} generated instances "
              "(`prorl swe build --generate` makes hundreds)")  # fmt: skip
        instances += generated
    return swe_rows(instances, agent=agent, tools=tools, compact=compact)


def _prepare(args: argparse.Namespace) -> int:
    if args.environment:
        return _prepare_environment(args)
    domains = DOMAINS if args.domain == "all" else (args.domain,)
    out = Path(args.out or "data/prorl")
    for domain in domains:
        rows = domain_rows(domain, args.agent, math_per_task=args.math_per_task, swe_generated=True)
        train, val = split_rows(rows, args.validation_fraction, seed=args.seed)
        n_train = write_jsonl(out / domain / "train.jsonl", train)
        n_val = write_jsonl(out / domain / "validation.jsonl", val)
        print(f"{domain}: {n_train} train, {n_val} validation rows -> {out / domain}")
    return 0


def _prepare_environment(args: argparse.Namespace) -> int:
    from nemo_gym_prorl.datasets.catalog import RecordError
    from nemo_gym_prorl.datasets.loading import SourceError
    from nemo_gym_prorl.datasets.prepare import prepare_environment

    try:
        prepared = prepare_environment(
            args.environment, args.source, data_dir=Path(args.out or "data"), agent=args.agent, limit=args.limit,
            validation_fraction=args.validation_fraction, seed=args.seed, progress=True,
        )  # fmt: skip
    except (KeyError, RecordError, SourceError) as exc:
        print(f"prorl data prepare: {exc.args[0] if exc.args else exc}", file=sys.stderr)
        return 1
    print(prepared.summary())
    return 0


def _environments(args: argparse.Namespace) -> int:
    from nemo_gym_prorl.datasets.environment_files import sync_readme, write_environment
    from nemo_gym_prorl.datasets.environments import catalog

    root = Path(args.root) if args.root else project_root()
    entries = catalog()
    if args.list:
        for env in entries.values():
            print(json.dumps({"environment": env.name, "dataset": env.title, "domain": env.domain,
                              "hub_id": env.hub_id, "license": env.license, "needs": env.needs}))  # fmt: skip
        return 0
    try:
        stale = [path for env in entries.values() for path in write_environment(env, root, check=args.check)]
    except FileNotFoundError as exc:
        return failed("data environments", exc, 1)
    if sync_readme(root / "docs" / "datasets.md", list(entries.values()), check=args.check):
        stale.append("docs/datasets.md (the datasets table)")
    if args.check and stale:
        print("out of date (run `prorl data environments`):\n  " + "\n  ".join(stale), file=sys.stderr)
        return 1
    print(f"{len(entries)} dataset environments; {'checked' if args.check else 'rewrote'} {len(stale)} files")
    return 0


def _examples(args: argparse.Namespace) -> int:
    root = Path(args.root) if args.root else project_root()
    for domain in args.domains or DOMAINS:
        rows = pick_examples(domain_rows(domain, args.agent, compact=True), 5)
        path = root / "resources_servers" / f"prorl_{domain}" / "data" / "example.jsonl"
        write_jsonl(path, rows)
        print(f"{path}: {len(rows)} rows")
    return 0


def _swe_build(args: argparse.Namespace) -> int:
    from nemo_gym_prorl.tasks.swe import SweConfig, build_all

    if args.generate:
        from nemo_gym_prorl.cli.swe_generated import generate_command

        return generate_command(args)

    config = SweConfig(cache_dir=Path(args.cache_dir)) if args.cache_dir else SweConfig()
    try:
        instances = asyncio.run(build_all(config, only=args.only or None))
    except Exception as exc:
        return failed("swe build", exc, 1)
    for inst in instances:
        print(f"{inst['instance_id']}: base {inst['base_commit'][:12]}, {len(inst['FAIL_TO_PASS'])} FAIL_TO_PASS, "
              f"{len(inst['PASS_TO_PASS'])} PASS_TO_PASS")  # fmt: skip
    print(f"instances: {config.instances_path}")
    return 0


def _swe_list(args: argparse.Namespace) -> int:
    from nemo_gym_prorl.tasks.swe import SweConfig, load_instances, load_recipes

    built = {i["instance_id"] for i in load_instances(SweConfig())}
    for recipe in load_recipes():
        state = "built" if recipe.instance_id in built else "not built"
        print(json.dumps({"instance_id": recipe.instance_id, "project": f"{recipe.project}=={recipe.version}",
                          "license": recipe.license, "state": state}))  # fmt: skip
    return 0


def add_data_parser(subparsers: argparse._SubParsersAction) -> None:
    data = subparsers.add_parser("data", help="task data (math, STEM, code, SWE) as Gym JSONL")
    data_sub = data.add_subparsers(dest="data_command", required=True)
    prep = data_sub.add_parser("prepare", help="train/validation JSONL in NeMo RL's Gym format")
    prep.add_argument("--domain", choices=("all", *DOMAINS), default="all")
    prep.add_argument(
        "--environment", help="a dataset environment (`prorl data environments --list`) instead of --domain"
    )
    prep.add_argument(
        "--source", help="with --environment: a local .jsonl/.json/.parquet file or folder, or a Hub id "
        "(default: the environment's Hub dataset)"
    )  # fmt: skip
    prep.add_argument(
        "--limit", type=int, default=None, help="with --environment: at most this many rows per split"
    )
    prep.add_argument("--out", default=None, help="default data/prorl (--domain) or data (--environment)")
    prep.add_argument("--validation-fraction", type=float, default=0.1)
    prep.add_argument("--seed", type=int, default=0)
    prep.add_argument("--agent", default=DEFAULT_AGENT, help="agent_ref.name of every row")
    prep.add_argument(
        "--math-per-task",
        type=int,
        default=200,
        help="procedural problems per reasoning-gym task (5 tasks; examples use 4)",
    )
    prep.set_defaults(func=_prepare)
    envs = data_sub.add_parser("environments", help="write environments/<name>/ of every dataset environment")
    envs.add_argument("--root", default=None, help="the project root to write into (default: this checkout)")
    envs.add_argument("--check", action="store_true", help="fail if any generated file is out of date")
    envs.add_argument("--list", action="store_true", help="list the dataset environments (JSON lines)")
    envs.set_defaults(func=_environments)
    ex = data_sub.add_parser("examples", help="regenerate resources_servers/prorl_*/data/example.jsonl")
    ex.add_argument("--root", default=None, help="the project root to write into (default: this checkout)")
    ex.add_argument("--agent", default=DEFAULT_AGENT)
    ex.add_argument("domains", nargs="*", choices=DOMAINS)
    ex.set_defaults(func=_examples)

    swe = subparsers.add_parser("swe", help="offline SWE instances from PyPI sdists")
    swe_sub = swe.add_subparsers(dest="swe_command", required=True)
    build = swe_sub.add_parser("build", help="download sdists, build repos and instances, validate")
    build.add_argument("--only", nargs="*", help="instance ids")
    build.add_argument("--cache-dir", help="default ${PRORL_HOME:-~/.cache/prorl}/swe")
    add_generate_arguments(build)
    build.set_defaults(func=_swe_build)
    add_verify_parser(swe_sub)
    lst = swe_sub.add_parser("list", help="recipes and whether they are built")
    lst.set_defaults(func=_swe_list)
