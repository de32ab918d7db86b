# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""STEM datasets -> `prorl_stem` rows."""

from __future__ import annotations

from nemo_gym_prorl.datasets.catalog import DatasetEnvironment

ENVIRONMENTS: tuple[DatasetEnvironment, ...] = ()
