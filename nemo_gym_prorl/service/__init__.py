# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The rollout HTTP service (native `/v1` API and ProRL-compatible API) and its Python client."""

from nemo_gym_prorl.service.app import create_app
from nemo_gym_prorl.service.backends import BackendInfo, BackendRegistry, PoolBackendRegistry
from nemo_gym_prorl.service.client import AsyncRolloutClient, RolloutClient
from nemo_gym_prorl.service.client_errors import RolloutAPIError
from nemo_gym_prorl.service.core import RolloutService, ServiceOptions

__all__ = [
    "AsyncRolloutClient",
    "BackendInfo",
    "BackendRegistry",
    "PoolBackendRegistry",
    "RolloutAPIError",
    "RolloutClient",
    "RolloutService",
    "ServiceOptions",
    "create_app",
]
