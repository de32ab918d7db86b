"""Issue 4 §6: `python benchmarks/bench_pipeline.py [--json]` (same as `prorl bench pipeline`)."""

from __future__ import annotations

import sys

from nemo_gym_prorl.cli_bench_pipeline import main

if __name__ == "__main__":
    sys.exit(main())
