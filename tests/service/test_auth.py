# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Bearer token: every API endpoint needs it when configured; health, metrics and schema do not."""

from __future__ import annotations

import pytest
from service_helpers import TOKEN, MakeApi

PROTECTED = [
    ("POST", "/v1/rollouts"),
    ("GET", "/v1/rollouts/x"),
    ("DELETE", "/v1/rollouts/x"),
    ("POST", "/v1/rollouts/wait"),
    ("POST", "/v1/rollouts/stream"),
    ("GET", "/v1/backends"),
    ("POST", "/v1/backends"),
    ("DELETE", "/v1/backends"),
    ("POST", "/v1/backends/drain"),
    ("GET", "/v1/status"),
    ("POST", "/add_llm_server"),
    ("POST", "/clear_llm_server"),
    ("POST", "/start"),
    ("POST", "/stop"),
    ("GET", "/status"),
    ("POST", "/cancel"),
    ("POST", "/process"),
]


@pytest.mark.parametrize("header", [None, "Bearer wrong-token-xyz", "Basic abc", f"bearer{TOKEN}"])
async def test_control_endpoints_refuse_without_the_token(make_api: MakeApi, header: str | None) -> None:
    api = await make_api(token=TOKEN, headers={"Authorization": header} if header else None)
    for method, path in PROTECTED:
        response = await api.http.request(method, path)
        assert response.status_code == 401, (method, path)
        assert response.json()["error"] == "unauthorized"
        assert response.headers["www-authenticate"] == "Bearer"
    for path in ("/healthz", "/metrics", "/openapi.json"):
        assert (await api.http.get(path)).status_code == 200


async def test_the_right_token_is_accepted(make_api: MakeApi) -> None:
    api = await make_api(token=TOKEN, headers={"Authorization": f"Bearer {TOKEN}"})
    assert (await api.http.get("/v1/status")).status_code == 200
    assert (await api.http.post("/v1/rollouts", json={"jobs": [{"task": "s"}]})).status_code == 202
