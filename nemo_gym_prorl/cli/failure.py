# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""How every `prorl` command says why it stops: one line on stderr, named by the command; and how a
command with a config loads it, refuses it or only prints it."""

from __future__ import annotations

import sys
from collections.abc import Callable

from pydantic import BaseModel


def failed(command: str, error: object, status: int = 2) -> int:
    """Say why `prorl <command>` stops and return its exit status (2: the input or configuration
    is refused; 1: the work itself failed)."""
    print(f"prorl {command}: {error}", file=sys.stderr)
    return status


def load_or_stop[ConfigT: BaseModel](
    command: str,
    load: Callable[[], ConfigT],
    refused: type[Exception] | tuple[type[Exception], ...],
    *,
    print_config: bool,
) -> ConfigT | int:
    """A command's validated config, or the exit status it stops with: 2 when `load` refuses the
    config (raising one of `refused`, said as `failed` says it), 0 once the config is printed when
    `--print-config` asked for nothing else."""
    try:
        config = load()
    except refused as exc:
        return failed(command, exc)
    if print_config:
        print(config.model_dump_json(indent=2))
        return 0
    return config
