# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Converters from public datasets' published schemas to this project's rows, one module per
domain; each module lists its `DatasetEnvironment`s in `ENVIRONMENTS`."""

from __future__ import annotations

from nemo_gym_prorl.datasets.catalog import DatasetEnvironment
from nemo_gym_prorl.datasets.converters import code, math, r2e_gym, stem, swe

ENVIRONMENTS: tuple[DatasetEnvironment, ...] = (
    *math.ENVIRONMENTS,
    *stem.ENVIRONMENTS,
    *code.ENVIRONMENTS,
    *swe.ENVIRONMENTS,
    *r2e_gym.ENVIRONMENTS,
)
