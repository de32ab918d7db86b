# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""A dataset environment's train and validation JSONL from its published records.

`prorl data prepare --environment NAME [--source PATH_OR_ID]` and the environments' Gym prepare
scripts (`gym eval prepare`) both land here. Rows go to `data/<name>/{train,validation}.jsonl`
(relative to the working directory, where Gym resolves `jsonl_fpath`).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from nemo_gym_prorl.datasets.catalog import DatasetEnvironment, RecordError
from nemo_gym_prorl.datasets.domain_tools import responses_tools
from nemo_gym_prorl.datasets.loading import is_single_split, load_records
from nemo_gym_prorl.datasets.rows import DEFAULT_AGENT, split_rows, write_jsonl

DATA_DIR = Path("data")
Split = str


def split_path(name: str, split: Split, data_dir: Path = DATA_DIR) -> Path:
    return data_dir / name / f"{split}.jsonl"


class Prepared(BaseModel):
    environment: str
    source: str
    train_path: Path
    validation_path: Path
    train_rows: int
    validation_rows: int
    skipped: dict[str, int]

    def summary(self) -> str:
        skipped = sum(self.skipped.values())
        why = "; ".join(f"{n} x {reason}" for reason, n in sorted(self.skipped.items())) if skipped else ""
        return (
            f"{self.environment}: {self.train_rows} train, {self.validation_rows} validation rows from "
            f"{self.source} -> {self.train_path.parent}" + (f" (skipped {skipped}: {why})" if skipped else "")
        )


def convert_records(
    env: DatasetEnvironment,
    records: Any,
    agent: str,
    skipped: Counter[str],
    limit: int | None = None,
    *,
    progress: str | None = None,
) -> list[dict[str, Any]]:
    """The gradeable rows of `records`; `progress`: a label to show the conversion under (a
    count and rate on standard error, as records stream from the Hub or a file)."""
    from tqdm import tqdm

    tools = responses_tools(env.domain)
    rows: list[dict[str, Any]] = []
    seen: set[str] = set()
    shown = tqdm(
        records, desc=progress, unit=" records", disable=progress is None, mininterval=1.0, leave=True
    )
    for record in shown:
        if limit is not None and len(rows) >= limit:
            break
        try:
            row = env.rows(record, tools, agent)
        except RecordError as exc:
            skipped[str(exc)] += 1
            continue
        # Converters derive task ids from the content (or the dataset's own id), so a record that
        # repeats an earlier one (DAPO-Math-17k publishes each problem ~100 times) gets its id.
        if row["task_id"] in seen:
            skipped["duplicate of an earlier record (same task_id)"] += 1
            continue
        seen.add(row["task_id"])
        rows.append(row)
    return rows


def environment_rows(
    env: DatasetEnvironment, source: str, agent: str = DEFAULT_AGENT, limit: int | None = None,
    validation_fraction: float = 0.1, seed: int = 0, progress: bool = False,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], Counter[str]]:  # fmt: skip
    """(train rows, validation rows, skipped reasons). A local file, or a folder of plain files
    without a dataset card, is all train records, split
    by `validation_fraction`; a folder or Hub id uses the entry's published splits."""
    skipped: Counter[str] = Counter()
    if is_single_split(source):
        label = f"{env.name} ({source})" if progress else None
        rows = convert_records(env, load_records(source, "train"), agent, skipped, limit, progress=label)
        train, validation = split_rows(rows, validation_fraction, seed=seed)
        return train, validation, skipped
    train = []
    for split in env.train_splits:
        left = None if limit is None else limit - len(train)
        label = f"{env.name} {split}" if progress else None
        records = load_records(source, split, env.hub_subset)
        train += convert_records(env, records, agent, skipped, left, progress=label)
    if env.validation_split is None:
        train, validation = split_rows(train, validation_fraction, seed=seed)
    else:
        records = load_records(source, env.validation_split, env.hub_subset)
        label = f"{env.name} {env.validation_split}" if progress else None
        validation = convert_records(env, records, agent, skipped, limit, progress=label)
    return train, validation, skipped


def prepare_environment(
    name: str, source: str | None = None, data_dir: Path = DATA_DIR, agent: str = DEFAULT_AGENT,
    limit: int | None = None, validation_fraction: float = 0.1, seed: int = 0, progress: bool = False,
) -> Prepared:  # fmt: skip
    from nemo_gym_prorl.datasets.environments import environment  # every converter: only when preparing

    env = environment(name)
    source = source or env.hub_id
    train, validation, skipped = environment_rows(
        env, source, agent, limit, validation_fraction, seed, progress=progress
    )
    if not train:
        reasons = ", ".join(skipped) or "the source has no records"
        raise RecordError(f"{name}: no gradeable rows in {source} ({reasons})")
    if not validation:
        raise RecordError(
            f"{name}: no validation rows from {source}: {len(train)} gradeable row(s), and a validation "
            "split needs one of its own (give a source with at least 2 gradeable rows)"
        )
    train_path, validation_path = (
        split_path(name, "train", data_dir),
        split_path(name, "validation", data_dir),
    )
    write_jsonl(train_path, train)
    write_jsonl(validation_path, validation)
    return Prepared(environment=name, source=source, train_path=train_path, validation_path=validation_path,
                    train_rows=len(train), validation_rows=len(validation), skipped=dict(skipped))  # fmt: skip


def prepare_split(name: str, split: Split, source: str | None = None, **options: Any) -> Path:
    """What an environment's Gym prepare script calls: both files, this split's path returned."""
    path = split_path(name, split)
    prepare_environment(name, source, **options)
    return path.absolute()
