# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Fixtures shared by the Gym agent's door tests (`/run`, and the rollout API it mounts)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from support.domain_servers import DomainServers, domain_servers


@pytest.fixture
async def domains() -> AsyncIterator[DomainServers]:
    """The project's four real resources servers over ASGI, sandboxes under a fresh root."""
    async with domain_servers() as servers:
        yield servers
