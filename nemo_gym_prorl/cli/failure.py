# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""How every `prorl` command says why it stops: one line on stderr, named by the command."""

from __future__ import annotations

import sys


def failed(command: str, error: object, status: int = 2) -> int:
    """Say why `prorl <command>` stops and return its exit status (2: the input or configuration
    is refused; 1: the work itself failed)."""
    print(f"prorl {command}: {error}", file=sys.stderr)
    return status
