# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Published records from a local file, a local dataset folder or a Hub id, with `datasets`.

A local `.jsonl`/`.json`/`.parquet` file holds one split (whatever its name); a folder or a Hub
id holds named splits, read as published. Only a Hub id downloads (into the `datasets` cache).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

FILE_LOADERS = {".jsonl": "json", ".json": "json", ".parquet": "parquet"}


class SourceError(RuntimeError):
    """The source cannot be read (missing file, unknown split, offline Hub id)."""


def is_local_file(source: str) -> bool:
    return Path(source).suffix in FILE_LOADERS and Path(source).is_file()


def load_records(source: str, split: str, subset: str | None = None) -> Iterator[dict[str, Any]]:
    """The records of one split. A local file is the split itself (`split` is ignored)."""
    import datasets  # slow import: only when preparing

    path = Path(source).expanduser()
    try:
        if path.suffix in FILE_LOADERS:
            if not path.is_file():
                raise SourceError(f"{source}: no such file")
            data = datasets.load_dataset(FILE_LOADERS[path.suffix], data_files=str(path), split="train")
        elif path.is_dir():
            data = datasets.load_dataset(str(path), subset, split=split)
        else:
            data = datasets.load_dataset(source, subset, split=split)
    except SourceError:
        raise
    except (FileNotFoundError, ValueError, ConnectionError, OSError) as exc:
        raise SourceError(f"cannot read split {split!r} of {source!r}: {exc}") from exc
    yield from data
