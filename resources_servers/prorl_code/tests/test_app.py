# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""prorl_code through NeMo Gym's own contract checks and over HTTP with real sandboxes."""

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient
from nemo_gym.verifier_fixture import exercise_verifier_fixture

from resources_servers.prorl_code.app import VERIFIER_FIXTURE

BARRELS = {
    "style": "stdio",
    "unit_tests": {"inputs": ["1\n4 1\n5 5 5 5\n", "1\n3 2\n0 0 0\n"], "outputs": ["10\n", "0\n"]},
}


@pytest.mark.bwrap
def test_verifier_fixture() -> None:
    asyncio.run(exercise_verifier_fixture(VERIFIER_FIXTURE, reward_range=(0.0, 1.0), determinism="unknown"))


@pytest.mark.bwrap
def test_tools_then_hidden_stdio_tests_with_partial_credit(
    response_with: Callable[[str], dict[str, Any]],
) -> None:
    server = VERIFIER_FIXTURE.server_factory()
    with TestClient(server.setup_webserver()) as client:
        row = {
            "responses_create_params": {"input": [{"role": "user", "content": "barrels"}]},
            "verifier_metadata": BARRELS,
        }
        assert client.post("/seed_session", json=row).status_code == 200
        obs = client.post("/bash", json={"command": "echo hello from $(pwd)"}).json()
        assert "hello from" in obs["text"], obs
        solution = ("t=int(input())\nfor _ in range(t):\n n,k=map(int,input().split())\n"
                    " a=sorted(map(int,input().split()),reverse=True)\n print(sum(a[:k+1]))\n")  # fmt: skip
        obs = client.post(
            "/editor", json={"command": "create", "path": "/workspace/solution.py", "file_text": solution}
        ).json()
        assert not obs["is_error"], obs
        # no code block in the final message: the solution file written with the editor is graded
        body = client.post("/verify", json={**row, "response": response_with("done")}).json()
        assert body["reward"] == 1.0 and body["report"]["source"] == "solution_file", body
        half = client.post(
            "/verify", json={**row, "response": response_with("```python\nprint(10)\n```")}
        ).json()
        assert half["reward_components"] == {"all_tests": 0.0, "partial_tests": pytest.approx(0.15)}
        assert half["reward"] == pytest.approx(0.15)
        flood = client.post(
            "/verify", json={**row, "response": response_with("```python\nwhile True: print('x'*1000)\n```")}
        ).json()
        assert flood["reward"] == 0.0 and flood["report"]["per_test"][0]["error_type"] == "output_limit"
        crash = client.post(
            "/verify", json={**row, "response": response_with("```python\nimport os; os.abort()\n```")}
        ).json()
        assert crash["reward"] == 0.0 and crash["mask_sample"] is False
    asyncio.run(server.close_all())
