# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Service fixtures: the app over scripted handlers, in-process (ASGI)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from service_helpers import Api, MakeApi, make_service
from support.scripted_stages import ScriptedHandler

from nemo_gym_prorl.service import RolloutService, create_app


@pytest.fixture
async def make_api() -> AsyncIterator[MakeApi]:
    opened: list[tuple[httpx.AsyncClient, RolloutService]] = []

    async def make(
        handler: ScriptedHandler | None = None,
        *,
        token: str | None = None,
        headers: dict[str, str] | None = None,
        **kw: Any,
    ) -> Api:
        svc, handler = make_service(handler, **kw)
        app = create_app(svc, token=token, manage_lifecycle=False)
        await svc.start()  # ASGITransport does not run the lifespan
        http = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://test", headers=headers
        )
        opened.append((http, svc))
        return Api(http, svc, handler)

    yield make
    for http, svc in opened:
        await http.aclose()
        await svc.close()


@pytest.fixture
async def api(make_api: MakeApi) -> Api:
    return await make_api()
