# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""What a Ray node that joins late must be told before it takes work."""

from __future__ import annotations

from typing import Any


class BackendChanges:
    """The backend changes made through the service since it started, in order, replayed on a
    node that joins later so it balances over the same backends and serves the same policy as
    the others. Only the newest policy publish is kept: a joining node needs the current policy,
    not its history."""

    def __init__(self) -> None:
        self._changes: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def record(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        if method == "publish_policy":
            self._changes = [change for change in self._changes if change[0] != "publish_policy"]
        self._changes.append((method, args, kwargs))

    def replay(self) -> list[tuple[str, tuple[Any, ...], dict[str, Any]]]:
        return list(self._changes)
