"""`prorl`: one command line for the whole project.

Subcommands import their implementation lazily, so `prorl --help` is instant and a missing
optional piece (say, vLLM on a login node) only matters to the subcommand that needs it.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType

BENCHMARKS_DIR = Path(__file__).resolve().parents[1] / "benchmarks"
BENCHMARK_NAMES = ("tools", "balancer", "pipeline", "eval", "dapo")


def load_benchmark(name: str) -> ModuleType:
    """Benchmarks live in `benchmarks/bench_<name>.py` of the source checkout (`make` installs
    the project editable from it), so they are measured code, not shipped code."""
    path = BENCHMARKS_DIR / f"bench_{name}.py"
    if not path.exists():
        raise SystemExit(f"prorl bench {name}: {path} not found (benchmarks need the source checkout)")
    if str(BENCHMARKS_DIR) not in sys.path:  # their shared helpers sit beside them
        sys.path.insert(0, str(BENCHMARKS_DIR))
    spec = importlib.util.spec_from_file_location(f"prorl_bench_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _bench(args: argparse.Namespace) -> int:
    return int(load_benchmark(args.name).main(as_json=args.json) or 0)


def _demo(args: argparse.Namespace) -> int:
    from nemo_gym_prorl.demo import run_demo

    return run_demo(quick=args.quick)


def _optional_parser(module: str, function: str, subparsers: argparse._SubParsersAction) -> None:
    """Register a subcommand whose module another part of the package provides."""
    try:
        add: Callable[[argparse._SubParsersAction], None] = getattr(importlib.import_module(module), function)
    except ImportError as exc:  # pragma: no cover - only when a dependency is missing
        print(f"prorl: {module} unavailable: {exc}", file=sys.stderr)
        return
    add(subparsers)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="prorl", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    bench = sub.add_parser("bench", help="run a benchmark side by side with its baseline")
    bench.add_argument("name", choices=BENCHMARK_NAMES)
    bench.add_argument("--json", action="store_true", help="print one JSON object")
    bench.set_defaults(func=_bench)

    demo = sub.add_parser("demo", help="the main job on the embedded defaults")
    demo.add_argument("--quick", action="store_true", help="a smaller run")
    demo.set_defaults(func=_demo)

    _optional_parser("nemo_gym_prorl.cli_model", "add_model_parser", sub)
    _optional_parser("nemo_gym_prorl.cli_serve", "add_serve_parser", sub)
    _optional_parser("nemo_gym_prorl.cli_data", "add_data_parser", sub)
    _optional_parser("nemo_gym_prorl.cli_gym", "add_gym_parser", sub)
    _optional_parser("nemo_gym_prorl.cli_nemo_rl", "add_nemo_rl_parser", sub)
    _optional_parser("nemo_gym_prorl.cli_sandbox", "add_sandbox_parser", sub)
    _optional_parser("nemo_gym_prorl.cli_show", "add_show_parser", sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
