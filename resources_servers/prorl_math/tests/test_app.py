# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""prorl_math through NeMo Gym's own contract checks and over HTTP with real sandboxes."""

import asyncio

import pytest
from fastapi.testclient import TestClient
from nemo_gym.verifier_fixture import exercise_verifier_fixture

from resources_servers.prorl_math.app import VERIFIER_FIXTURE


def _response(text: str) -> dict:
    return {"id": "r", "created_at": 0, "model": "m", "object": "response", "parallel_tool_calls": False,
            "tool_choice": "auto", "tools": [], "output": [{"id": "m1", "type": "message", "role": "assistant",
            "status": "completed", "content": [{"type": "output_text", "text": text, "annotations": []}]}]}  # fmt: skip


def test_verifier_fixture() -> None:
    asyncio.run(exercise_verifier_fixture(VERIFIER_FIXTURE, reward_range=(0.0, 1.0), determinism="unknown"))


@pytest.mark.bwrap
def test_session_tool_and_verify_over_http() -> None:
    server = VERIFIER_FIXTURE.server_factory()
    with TestClient(server.setup_webserver()) as client:
        row = {
            "responses_create_params": {"input": [{"role": "user", "content": "6*7?"}]},
            "expected_answer": "42",
        }
        assert client.post("/seed_session", json=row).status_code == 200
        obs = client.post("/ipython", json={"code": "x = 6 * 7\nprint(x)"}).json()
        assert "42" in obs["text"] and not obs["is_error"], obs
        obs = client.post("/ipython", json={"cod": "oops"}).json()  # bad arguments: an observation, not a 500
        assert obs["is_error"]
        res = client.post("/verify", json={**row, "response": _response("It is \\boxed{42}.")})
        assert res.status_code == 200, res.text
        body = res.json()
        assert body["reward"] == 1.0 and body["reward_components"] == {"accuracy": 1.0}
        assert body["extracted_answer"] == "42" and body["mask_sample"] is False
        assert not server._sessions  # the RUN sandbox is closed at verify
        bad = client.post("/verify", json={"responses_create_params": {"input": []}})
        assert bad.status_code == 422  # malformed body: a 4xx with the reason, never a 500
        garbage = client.post("/verify", json={**row, "response": _response("\\boxed{" + "{" * 5000 + "}")})
        assert garbage.status_code == 200 and garbage.json()["reward"] == 0.0
    asyncio.run(server.close_all())


@pytest.mark.bwrap
def test_shutdown_closes_every_open_session() -> None:
    server = VERIFIER_FIXTURE.server_factory()
    with TestClient(server.setup_webserver()) as client:
        row = {
            "responses_create_params": {"input": [{"role": "user", "content": "1+1?"}]},
            "expected_answer": "2",
        }
        assert client.post("/seed_session", json=row).status_code == 200
        assert client.post("/ipython", json={"code": "1 + 1"}).json()["text"].strip().endswith("2")
        (session,) = server._sessions.values()
        workspace = session.sandbox.workspace
        assert workspace.exists()
    assert not server._sessions and not workspace.exists(), "the app's shutdown closed the session"
