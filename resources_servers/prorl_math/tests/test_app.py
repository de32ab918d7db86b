# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""prorl_math through NeMo Gym's own contract checks and over HTTP with real sandboxes."""

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient
from nemo_gym.verifier_fixture import exercise_verifier_fixture

from resources_servers.prorl_math.app import VERIFIER_FIXTURE


def _seeded(client: TestClient, question: str, answer: str) -> dict[str, Any]:
    """A session seeded with a one-question row; returns the row."""
    row = {
        "responses_create_params": {"input": [{"role": "user", "content": question}]},
        "expected_answer": answer,
    }
    assert client.post("/seed_session", json=row).status_code == 200
    return row


def test_verifier_fixture() -> None:
    asyncio.run(exercise_verifier_fixture(VERIFIER_FIXTURE, reward_range=(0.0, 1.0), determinism="unknown"))


@pytest.mark.bwrap
def test_session_tool_and_verify_over_http(response_with: Callable[[str], dict[str, Any]]) -> None:
    server = VERIFIER_FIXTURE.server_factory()
    with TestClient(server.setup_webserver()) as client:
        row = _seeded(client, "6*7?", "42")
        obs = client.post("/ipython", json={"code": "x = 6 * 7\nprint(x)"}).json()
        assert "42" in obs["text"] and not obs["is_error"], obs
        obs = client.post("/ipython", json={"cod": "oops"}).json()  # bad arguments: an observation, not a 500
        assert obs["is_error"]
        res = client.post("/verify", json={**row, "response": response_with("It is \\boxed{42}.")})
        assert res.status_code == 200, res.text
        body = res.json()
        assert body["reward"] == 1.0 and body["reward_components"] == {"accuracy": 1.0}
        assert body["extracted_answer"] == "42" and body["mask_sample"] is False
        assert not server._sessions  # the RUN sandbox is closed at verify
        bad = client.post("/verify", json={"responses_create_params": {"input": []}})
        assert bad.status_code == 422  # malformed body: a 4xx with the reason, never a 500
        garbage = client.post(
            "/verify", json={**row, "response": response_with("\\boxed{" + "{" * 5000 + "}")}
        )
        assert garbage.status_code == 200 and garbage.json()["reward"] == 0.0
    asyncio.run(server.close_all())


@pytest.mark.bwrap
def test_shutdown_closes_every_open_session() -> None:
    server = VERIFIER_FIXTURE.server_factory()
    with TestClient(server.setup_webserver()) as client:
        _seeded(client, "1+1?", "2")
        assert client.post("/ipython", json={"code": "1 + 1"}).json()["text"].strip().endswith("2")
        (session,) = server._sessions.values()
        workspace = session.sandbox.workspace
        assert workspace.exists()
    assert not server._sessions and not workspace.exists(), "the app's shutdown closed the session"
