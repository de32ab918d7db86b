"""`prorl bench pipeline [--json]`: the INIT/RUN/EVAL pipeline against a coupled baseline."""

from __future__ import annotations

import argparse
import asyncio
import json as jsonlib
import sys

from nemo_gym_prorl.pipeline.benchmark import benchmark, format_report


def run(json: bool = False, *, jobs: int = 256, slots: int = 16, scale: float = 1.0) -> int:
    """Run the benchmark; print one JSON object (`json=True`) or a readable report. Exit code 0."""
    report = asyncio.run(benchmark(jobs=jobs, slots=slots, scale=scale))
    print(jsonlib.dumps(report, indent=2) if json else format_report(report), flush=True)
    return 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--jobs", type=int, default=256)
    parser.add_argument("--slots", type=int, default=16, help="generation slots (model concurrency)")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply the stage durations")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="prorl bench pipeline", description=__doc__)
    add_arguments(parser)
    args = parser.parse_args(argv)
    return run(args.json, jobs=args.jobs, slots=args.slots, scale=args.scale)


if __name__ == "__main__":
    sys.exit(main())
