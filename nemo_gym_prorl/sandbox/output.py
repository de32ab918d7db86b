# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Bounded capture of process output: keep the head and the tail, drop the middle."""

from __future__ import annotations

import re

# CSI/OSC escape sequences and lone control bytes a terminal would interpret, not show.
_ANSI_RE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def strip_ansi(text: str) -> str:
    """Remove terminal escape sequences and control characters (keeps \\n, \\r and \\t)."""
    return _CONTROL_RE.sub("", _ANSI_RE.sub("", text))


def truncation_marker(dropped: int) -> str:
    return f"\n[... {dropped} bytes of output truncated ...]\n"


class CappedBuffer:
    """Accumulates bytes up to `limit`, keeping the first and last halves.

    Memory stays bounded however much a process prints (`yes` runs forever without
    growing this), while the model still sees how the output started and ended.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._head = bytearray()
        self._tail = bytearray()
        self.dropped = 0

    @property
    def total(self) -> int:
        return len(self._head) + len(self._tail) + self.dropped

    def write(self, data: bytes) -> None:
        head_room = self.limit // 2 - len(self._head)
        if head_room > 0:
            self._head += data[:head_room]
            data = data[head_room:]
        if not data:
            return
        self._tail += data
        tail_limit = self.limit - self.limit // 2
        excess = len(self._tail) - tail_limit
        if excess > 0:
            del self._tail[:excess]
            self.dropped += excess

    @property
    def truncated(self) -> bool:
        return self.dropped > 0

    def getvalue(self) -> bytes:
        return bytes(self._head + self._tail)

    def text(self) -> str:
        head = self._head.decode("utf-8", errors="replace")
        tail = self._tail.decode("utf-8", errors="replace")
        if self.dropped:
            return head + truncation_marker(self.dropped) + tail
        return head + tail
