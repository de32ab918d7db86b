# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The dataset environments by name: every converter module's `ENVIRONMENTS`."""

from __future__ import annotations

from nemo_gym_prorl.datasets.catalog import DatasetEnvironment
from nemo_gym_prorl.datasets.converters import ENVIRONMENTS


def catalog() -> dict[str, DatasetEnvironment]:
    """Every dataset environment by name."""
    return {env.name: env for env in ENVIRONMENTS}


def environment(name: str) -> DatasetEnvironment:
    found = catalog()
    if name not in found:
        raise KeyError(f"unknown dataset environment {name!r}; known: {', '.join(sorted(found))}")
    return found[name]
