# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""`prorl bench NAME`: run a benchmark side by side with its baseline."""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import sys
from types import ModuleType

from nemo_gym_prorl.cli.failure import failed


def benchmark_names() -> tuple[str, ...]:
    """Every `benchmarks/bench_<name>.py` there is: a new benchmark file is a new command."""
    from nemo_gym_prorl.assets import AssetError, benchmarks_dir

    try:
        return tuple(sorted(path.stem.removeprefix("bench_") for path in benchmarks_dir().glob("bench_*.py")))
    except AssetError:
        return ()


def load_benchmark(name: str) -> ModuleType:
    """Benchmarks live in `benchmarks/bench_<name>.py` (a checkout's top level, or bundled in
    the wheel); their shared helpers sit beside them."""
    return _load_module(f"bench_{name}")


def _load_module(stem: str) -> ModuleType:
    from nemo_gym_prorl.assets import AssetError, benchmarks_dir

    try:
        directory = benchmarks_dir()
    except AssetError as exc:
        raise SystemExit(f"prorl bench: {exc}") from None
    path = directory / f"{stem}.py"
    if not path.exists():
        raise SystemExit(f"prorl bench: {path} not found")
    if str(directory) not in sys.path:
        sys.path.insert(0, str(directory))
    spec = importlib.util.spec_from_file_location(f"prorl_{stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # as an import does: dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _bench(args: argparse.Namespace) -> int:
    if (
        args.name == "report"
    ):  # the benchmarks page's tables (docs/benchmarks.md) from benchmarks/results/*.json
        return int(_load_module("provenance").main(as_json=args.json, check=args.check) or 0)
    if args.json:  # it records: refused on a dirty tree before anything runs, unless told
        from nemo_gym_prorl.provenance import DirtyTreeError, check_recordable

        try:
            check_recordable(allow_dirty=args.allow_dirty)
        except DirtyTreeError as exc:
            return failed("bench", exc)
    from nemo_gym_prorl.demo.shutdown import Interrupted, StopOnSignals

    benchmark = load_benchmark(args.name)
    if args.options and "argv" not in inspect.signature(benchmark.main).parameters:
        return failed("bench", f"{args.name} takes no options of its own (given: {' '.join(args.options)})")
    options = {"argv": args.options} if args.options else {}
    # SIGTERM's default would end this process on the spot, leaving the services, backends and
    # directories the benchmark started; handled, it unwinds the benchmark, which stops them.
    try:
        with StopOnSignals("[bench] {signal}: already stopping what the benchmark started"):
            return int(benchmark.main(as_json=args.json, **options) or 0)
    except Interrupted as stop:
        print(f"[bench] {args.name} stopped by {stop.name}", file=sys.stderr)
        return stop.exit_code


def add_bench_parser(subparsers: argparse._SubParsersAction) -> None:
    bench = subparsers.add_parser("bench", help="run a benchmark side by side with its baseline")
    bench.add_argument("name", choices=(*benchmark_names(), "report"), help="a benchmark, or `report`: "
                       "regenerate docs/benchmarks.md's tables from benchmarks/results/*.json")  # fmt: skip
    bench.add_argument("--json", action="store_true",
                       help="print one JSON object and write benchmarks/results/NAME.json "
                       "(from an installed package: outputs/results/NAME.json)")  # fmt: skip
    bench.add_argument(
        "--check", action="store_true", help="report: fail if docs/benchmarks.md's tables are stale"
    )
    bench.add_argument("--allow-dirty", action="store_true",
                       help="with --json: record even with uncommitted changes (the file says so)")  # fmt: skip
    bench.add_argument("options", nargs="*", metavar="OPTION",
                       help="after `--`, the benchmark's own: rl_families POLICY; harness --policy DIR, "
                       "--repetitions N, --rollouts N, --no-grpo")  # fmt: skip
    bench.set_defaults(func=_bench)
