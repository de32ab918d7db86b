# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Where DAPO's prompts come from: an in-memory list or iterator, a JSONL file, or an epoch-aware
cycle over either.

A source hands out one prompt at a time (the scheduler starts prompts as slots free, so it never
needs a whole batch up front) and says when it is exhausted. JSONL is read lazily, line by line:
a large training file is never loaded whole.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, Field


class PromptRow(BaseModel):
    """One prompt: its dataset row plus where it came from (for logs and resumption)."""

    key: str = Field(
        description="Stable name of the prompt within the source (epoch-qualified when cycling)."
    )
    row: dict[str, Any]
    epoch: int = 0
    index: int = Field(0, description="Position within the epoch.")


@runtime_checkable
class PromptSource(Protocol):
    def next_prompt(self) -> PromptRow | None:
        """The next prompt, or None once the source is exhausted (then always None)."""
        ...

    def position(self) -> dict[str, Any]:
        """Where the source stands (epoch, index, exhausted), for status reports."""
        ...


def _row_key(row: Mapping[str, Any], index: int, key_field: str | None) -> str:
    if key_field and key_field in row:
        return str(row[key_field])
    return str(index)


class RowsSource:
    """Rows from a list or any iterable (consumed lazily, once)."""

    def __init__(self, rows: Iterable[Mapping[str, Any]], *, key_field: str | None = "task_id") -> None:
        self._rows: Iterator[Mapping[str, Any]] = iter(rows)
        self._key_field = key_field
        self._index = 0
        self._exhausted = False

    def next_prompt(self) -> PromptRow | None:
        if self._exhausted:
            return None
        try:
            row = next(self._rows)
        except StopIteration:
            self._exhausted = True
            return None
        if not isinstance(row, Mapping):
            raise TypeError(f"prompt row {self._index} is {type(row).__name__}, not a mapping")
        prompt = PromptRow(key=_row_key(row, self._index, self._key_field), row=dict(row), index=self._index)
        self._index += 1
        return prompt

    def position(self) -> dict[str, Any]:
        return {"epoch": 0, "index": self._index, "exhausted": self._exhausted}


def iter_jsonl(path: str | Path) -> Iterator[dict[str, Any]]:
    """Rows of a JSONL file, lazily; blank lines skipped; a bad line names its line number."""
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{lineno}: not JSON ({exc.msg})") from None
            if not isinstance(row, dict):
                raise ValueError(f"{path}:{lineno}: a row must be a JSON object")
            yield row


class JsonlSource(RowsSource):
    """A JSONL file read lazily, once."""

    def __init__(self, path: str | Path, *, key_field: str | None = "task_id") -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise FileNotFoundError(f"no JSONL file at {self.path}")
        super().__init__(iter_jsonl(self.path), key_field=key_field)


class CyclingSource:
    """Epochs over a re-iterable dataset: `epochs` passes (None: forever), each optionally
    shuffled with a per-epoch seed so a run is reproducible and resumable by (epoch, index).

    `rows` is a list, a JSONL path, or a zero-argument callable returning a fresh iterable.
    Shuffling needs the epoch in memory; without it JSONL epochs are streamed.
    """

    def __init__(
        self,
        rows: list[Mapping[str, Any]] | str | Path | Callable[[], Iterable[Mapping[str, Any]]],
        *,
        epochs: int | None = 1,
        shuffle_seed: int | None = None,
        key_field: str | None = "task_id",
        start_epoch: int = 0,
        start_index: int = 0,
    ) -> None:
        if epochs is not None and epochs < 1:
            raise ValueError("epochs must be >= 1 (or None for no limit)")
        if isinstance(rows, str | Path):
            path = Path(rows)
            if not path.is_file():
                raise FileNotFoundError(f"no JSONL file at {path}")
            self._open: Callable[[], Iterable[Mapping[str, Any]]] = lambda: iter_jsonl(path)
        elif callable(rows):
            self._open = rows
        else:
            frozen = list(rows)
            self._open = lambda: frozen
        self.epochs = epochs
        self.shuffle_seed = shuffle_seed
        self._key_field = key_field
        self._epoch = start_epoch
        self._index = 0
        self._skip = start_index
        self._iter: Iterator[Mapping[str, Any]] | None = None
        self._exhausted = False
        self._empty_epochs = 0

    def _begin_epoch(self) -> Iterator[Mapping[str, Any]]:
        rows: Iterable[Mapping[str, Any]] = self._open()
        if self.shuffle_seed is not None:
            shuffled = list(rows)
            # Seed per epoch: each epoch a different order, the same one on every run.
            random.Random(self.shuffle_seed * 1_000_003 + self._epoch).shuffle(shuffled)
            rows = shuffled
        it = iter(rows)
        for _ in range(self._skip):  # resuming mid-epoch
            next(it, None)
        self._index, self._skip = self._skip, 0
        return it

    def next_prompt(self) -> PromptRow | None:
        while not self._exhausted:
            if self.epochs is not None and self._epoch >= self.epochs:
                self._exhausted = True
                break
            if self._iter is None:
                self._iter = self._begin_epoch()
            row = next(self._iter, None)
            if row is None:
                # An empty dataset would otherwise cycle forever without yielding anything.
                self._empty_epochs = self._empty_epochs + 1 if self._index == 0 else 0
                if self._empty_epochs >= 2:
                    self._exhausted = True
                    break
                self._epoch += 1
                self._iter = None
                continue
            self._empty_epochs = 0
            index = self._index
            self._index += 1
            return PromptRow(
                key=f"e{self._epoch}/{_row_key(row, index, self._key_field)}",
                row=dict(row),
                epoch=self._epoch,
                index=index,
            )
        return None

    def position(self) -> dict[str, Any]:
        return {"epoch": self._epoch, "index": self._index, "exhausted": self._exhausted}
