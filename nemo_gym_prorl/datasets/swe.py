# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""SWE-bench-format instances -> NeMo Gym rows for the `prorl_swe` resources server."""

from __future__ import annotations

from typing import Any

from nemo_gym_prorl.datasets.rows import make_row
from nemo_gym_prorl.tasks.swe.task import SWE_SYSTEM

COMPACT_FIELDS = ("repo", "version", "base_commit", "problem_statement", "license", "source")


def swe_rows(instances: list[dict[str, Any]], agent: str = "prorl_agent", tools: list[dict[str, Any]] | None = None,
             compact: bool = False) -> list[dict[str, Any]]:  # fmt: skip
    """Gym rows. `compact`: only what the agent may see plus the id; the server completes the row
    from the built cache (hidden tests, gold patch and test lists stay out of the data file)."""
    rows = []
    for inst in instances:
        user = f"<issue>\n{inst['problem_statement']}\n</issue>\n\nThe repository is at /testbed. Resolve the issue."
        keep = COMPACT_FIELDS if compact else tuple(inst)
        fields = {k: v for k, v in inst.items() if k in keep and k != "instance_id"}
        rows.append(make_row("prorl_swe", inst["instance_id"], SWE_SYSTEM, user, tools, agent,
                             instance_id=inst["instance_id"], **fields))  # fmt: skip
    return rows
