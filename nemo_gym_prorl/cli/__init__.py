# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The `prorl` command line: one module per command group (see `main`)."""

from nemo_gym_prorl.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
