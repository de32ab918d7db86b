"""Balancer benchmark (issue 3 §6): ours vs ProRL's assignment heap vs round robin.

    .venv/bin/python benchmarks/bench_balancer.py [--json] [--trajectories N]

Same as `prorl bench balancer`; the implementation is `nemo_gym_prorl.llm.balancer_bench`.
"""

from __future__ import annotations

import argparse
import sys

from nemo_gym_prorl.cli_bench_balancer import run
from nemo_gym_prorl.llm.balancer_bench import BenchConfig

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--trajectories", type=int, default=BenchConfig().trajectories)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    sys.exit(run(json=args.json, config=BenchConfig(trajectories=args.trajectories, seed=args.seed)))
