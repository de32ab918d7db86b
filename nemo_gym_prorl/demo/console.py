# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The demo's lines on the terminal."""

from __future__ import annotations

PREFIX = "\033[1m[demo]\033[0m"


def say(message: str) -> None:
    print(f"{PREFIX} {message}", flush=True)
