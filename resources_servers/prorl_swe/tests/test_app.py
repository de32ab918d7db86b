# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""prorl_swe through NeMo Gym's own contract checks and a full session over HTTP: the repository
at /testbed, a fix made with the bash tool, the git diff collected and graded by swebench.
Needs the offline instances (built on first use: pip downloads four small sdists from PyPI once)."""

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from nemo_gym.verifier_fixture import exercise_verifier_fixture

from nemo_gym_prorl.tasks.swe import ensure_built
from resources_servers.prorl_swe.app import VERIFIER_FIXTURE

EXAMPLES = Path(__file__).parents[1] / "data" / "example.jsonl"
pytestmark = [pytest.mark.bwrap, pytest.mark.slow]


@pytest.fixture(scope="module", autouse=True)
def built() -> None:
    asyncio.run(ensure_built())


def test_verifier_fixture() -> None:
    asyncio.run(exercise_verifier_fixture(VERIFIER_FIXTURE, reward_range=(0.0, 1.0), determinism="unknown"))


def test_fix_with_bash_resolves_and_no_change_does_not(
    response_with: Callable[[str], dict[str, Any]],
) -> None:
    row = next(
        r for r in map(json.loads, EXAMPLES.read_text().splitlines()) if "inflection" in r["instance_id"]
    )
    server = VERIFIER_FIXTURE.server_factory()
    with TestClient(server.setup_webserver()) as client:
        assert client.post("/seed_session", json=row).status_code == 200
        obs = client.post(
            "/bash",
            json={
                "command": "cd /testbed && git status --short && grep -n '(11, 12)' inflection/__init__.py"
            },
        ).json()
        assert "(11, 12)" in obs["text"], obs
        fix = "sed -i 's/in (11, 12):/in (11, 12, 13):/' /testbed/inflection/__init__.py && echo ok"
        assert "ok" in client.post("/bash", json={"command": fix}).json()["text"]
        body = client.post("/verify", json={**row, "response": response_with("Fixed.")}).json()
        assert body["reward"] == 1.0 and body["resolved"] is True, body.get("report")
        assert body["report"]["pass_rates"] == {"FAIL_TO_PASS": 1.0, "PASS_TO_PASS": 1.0}
        # a new session that changes nothing: empty patch, unresolved
        assert client.post("/seed_session", json=row).status_code == 200
        body = client.post("/verify", json={**row, "response": response_with("I could not fix it.")}).json()
        assert body["reward"] == 0.0 and body["reason"] == "empty_patch"
    asyncio.run(server.close_all())
