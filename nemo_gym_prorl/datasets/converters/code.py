# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""CODE datasets -> `prorl_code` rows."""

from __future__ import annotations

from nemo_gym_prorl.datasets.catalog import DatasetEnvironment

ENVIRONMENTS: tuple[DatasetEnvironment, ...] = ()
