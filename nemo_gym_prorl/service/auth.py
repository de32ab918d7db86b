# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Optional bearer-token check for the API (everything except /healthz, /metrics and the schema)."""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable

from fastapi import Request

from nemo_gym_prorl.service.errors import ApiError


def bearer_guard(token: str | None) -> Callable[[Request], Awaitable[None]]:
    """A FastAPI dependency: no-op without a token, else 401 unless `Authorization: Bearer <token>`."""

    async def check(request: Request) -> None:
        if token is None:
            return
        header = request.headers.get("authorization", "")
        scheme, _, given = header.partition(" ")
        if scheme.lower() != "bearer" or not given:
            raise ApiError(401, "unauthorized", "missing bearer token", {"WWW-Authenticate": "Bearer"})
        # Constant-time comparison: no timing oracle on the token.
        if not hmac.compare_digest(given.strip().encode(), token.encode()):
            raise ApiError(401, "unauthorized", "invalid bearer token", {"WWW-Authenticate": "Bearer"})

    return check
