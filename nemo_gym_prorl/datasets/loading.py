# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Published records from a local file, a local dataset folder or a Hub id, with `datasets`.

A local `.jsonl`/`.json`/`.parquet`/`.csv`/`.tsv` file holds one split (whatever its name); a
folder or a Hub id holds named splits, read as published (a folder of plain files without a
dataset card has one, `train`). Only a Hub id downloads (into the `datasets` cache). A source that
cannot be read, or is malformed (a truncated JSONL line, a ragged CSV), is one `SourceError`
naming the file and what is wrong, never a traceback.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path
from typing import Any

# Suffix -> (`datasets` loader, its options).
FILE_LOADERS: dict[str, tuple[str, dict[str, Any]]] = {
    ".jsonl": ("json", {}),
    ".json": ("json", {}),
    ".parquet": ("parquet", {}),
    ".csv": ("csv", {}),
    ".tsv": ("csv", {"delimiter": "\t"}),
}


class SourceError(RuntimeError):
    """The source cannot be read (missing file, unknown split, offline Hub id)."""


def is_local_file(source: str) -> bool:
    return Path(source).suffix in FILE_LOADERS and Path(source).is_file()


def is_single_split(source: str) -> bool:
    """A local file, or a folder of plain files without a dataset card: one split of records,
    which `prepare` divides into train and validation itself."""
    path = Path(source).expanduser()
    if is_local_file(source):
        return True
    return path.is_dir() and not (path / "README.md").is_file() and not any(path.glob("*.py"))


def load_records(source: str, split: str, subset: str | None = None) -> Iterator[dict[str, Any]]:
    """The records of one split. A local file is the split itself (`split` is ignored)."""
    import datasets  # slow import: only when preparing
    from datasets.exceptions import DatasetGenerationError

    path = Path(source).expanduser()
    # A file datasets cannot read is one SourceError below; its own log line saying the same
    # (before the exception reaches us) would be a second message for one fault.
    verbosity = datasets.logging.get_verbosity()
    datasets.logging.set_verbosity(datasets.logging.CRITICAL)
    try:
        if path.suffix in FILE_LOADERS:
            if not path.is_file():
                raise SourceError(f"{source}: no such file")
            loader, options = _loader(datasets, path)
            data = datasets.load_dataset(loader, data_files=str(path), split="train", **options)
        elif path.is_dir():
            data = _load_folder(datasets, path, split, subset)
        else:
            data = datasets.load_dataset(source, subset, split=split)
    except SourceError:
        raise
    except DatasetGenerationError as exc:
        cause = exc.__cause__ or exc
        raise SourceError(f"{source} is malformed: {type(cause).__name__}: {cause}") from None
    except (FileNotFoundError, ValueError, ConnectionError, OSError) as exc:
        what = source if path.is_file() else f"split {split!r} of {source!r}"
        raise SourceError(f"cannot read {what}: {exc}") from exc
    finally:
        datasets.logging.set_verbosity(verbosity)
    yield from data


def _loader(datasets: Any, path: Path) -> tuple[str, dict[str, Any]]:
    """The `datasets` loader of a file and its options. A CSV's cells are read as the text they
    are (type inference would turn an answer column of numbers into ints, `2.50` into 2.5)."""
    loader, options = FILE_LOADERS[path.suffix]
    if loader != "csv":
        return loader, options
    with path.open(newline="", encoding="utf-8") as fh:
        header = next(csv.reader(fh, delimiter=options.get("delimiter", ",")), [])
    text = datasets.Features({name: datasets.Value("string") for name in header})
    return loader, {**options, "features": text, "keep_default_na": False}


def _load_folder(datasets: Any, path: Path, split: str, subset: str | None) -> Any:
    """A dataset folder as published (its card names its configs and splits), or a folder of
    plain files without a card: their one split, `train`, whatever the split or config asked."""
    if (path / "README.md").is_file() or any(path.glob("*.py")):
        return datasets.load_dataset(str(path), subset, split=split)
    tables = sorted(p for p in path.iterdir() if p.suffix in (".csv", ".tsv"))
    if tables and all(p.suffix == tables[0].suffix for p in tables):
        loader, options = _loader(datasets, tables[0])
        data = datasets.load_dataset(loader, data_files={"train": [str(p) for p in tables]}, **options)
    else:
        data = datasets.load_dataset(str(path))
    if split in data:
        return data[split]
    if len(data) == 1:
        return next(iter(data.values()))
    raise SourceError(f"{path} has no split {split!r} (it has {', '.join(data)})")
