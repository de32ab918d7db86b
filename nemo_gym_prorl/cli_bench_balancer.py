"""`prorl bench balancer [--json]`: the CLI face of `nemo_gym_prorl.llm.balancer_bench`."""

from __future__ import annotations

import asyncio
import json as jsonlib
import sys

from nemo_gym_prorl.llm.balancer_bench import BenchConfig, format_report, run_benchmark


def run(json: bool = False, config: BenchConfig | None = None) -> int:
    """Run the benchmark; print a report (or, with `json`, exactly one JSON object on stdout)."""

    def progress(message: str) -> None:
        print(f"[bench balancer] {message}", file=sys.stderr if json else sys.stdout, flush=True)

    result = asyncio.run(run_benchmark(config, progress=progress))
    if json:
        print(jsonlib.dumps(result))
    else:
        print(format_report(result))
    return 0
