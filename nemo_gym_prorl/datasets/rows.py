# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""A NeMo Gym row and its files: the one row builder every dataset converter calls, JSONL
reading and writing, and the deterministic train/validation split.

A row: `{"responses_create_params": {"input": [...], "tools": [...]}, "agent_ref": {...},
"data_source": "prorl_<domain>", "task_id": ..., <task fields>}`.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

DEFAULT_AGENT = "prorl_agent"


def make_row(
    data_source: str,
    task_id: str,
    system: str,
    user: str,
    tools: list[dict[str, Any]] | None = None,
    agent: str = DEFAULT_AGENT,
    **fields: Any,
) -> dict[str, Any]:
    params: dict[str, Any] = {
        "input": [{"role": "system", "content": system}, {"role": "user", "content": user}]
    }
    if tools:
        params["tools"] = tools
    return {
        "responses_create_params": params,
        "agent_ref": {"type": "responses_api_agents", "name": agent},
        "data_source": data_source,
        "task_id": task_id,
        **fields,
    }


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def write_jsonl(path: str | Path, rows: Iterable[Mapping[str, Any]]) -> int:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
            n += 1
    return n


def split_rows(
    rows: list[dict[str, Any]], validation_fraction: float, seed: int = 0
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Deterministic train/validation split. With two rows or more and a fraction above 0,
    each side keeps at least one row (a small source still gets a validation row)."""
    order = list(range(len(rows)))
    random.Random(seed).shuffle(order)
    n_val = round(len(rows) * validation_fraction)
    if validation_fraction > 0 and len(rows) >= 2:
        n_val = min(max(n_val, 1), len(rows) - 1)
    val = set(order[:n_val])
    return [r for i, r in enumerate(rows) if i not in val], [r for i, r in enumerate(rows) if i in val]


def pick_examples(rows: list[dict[str, Any]], n: int = 5) -> list[dict[str, Any]]:
    """A handful of rows spread over the sources (for `data/example.jsonl`)."""
    by_source: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_source.setdefault(str(row.get("source")), []).append(row)
    picked: list[dict[str, Any]] = []
    while len(picked) < n and any(by_source.values()):
        for source in list(by_source):
            if by_source[source] and len(picked) < n:
                picked.append(by_source[source].pop(0))
    return picked
