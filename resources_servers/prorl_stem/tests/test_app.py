# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""prorl_stem through NeMo Gym's own contract checks and over HTTP."""

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from nemo_gym.verifier_fixture import exercise_verifier_fixture

from resources_servers.prorl_stem.app import VERIFIER_FIXTURE

EXAMPLES = Path(__file__).parents[1] / "data" / "example.jsonl"


def test_verifier_fixture() -> None:
    asyncio.run(exercise_verifier_fixture(VERIFIER_FIXTURE, reward_range=(0.0, 1.0), determinism="unknown"))


def test_example_rows_grade_their_own_answers(response_with: Callable[[str], dict[str, Any]]) -> None:
    server = VERIFIER_FIXTURE.server_factory()
    with TestClient(server.setup_webserver()) as client:
        for line in EXAMPLES.read_text().splitlines():
            row = json.loads(line)
            gold = row["expected_answer"]
            right = f"Reasoning...\nAnswer: {gold}" if row["answer_type"] == "mc" else f"\\boxed{{{gold}}}"
            wrong = "Answer: Z" if row["answer_type"] == "mc" else "\\boxed{12345 kg}"
            for text, want in ((right, 1.0), (wrong, 0.0), ("", 0.0)):
                res = client.post("/verify", json={**row, "response": response_with(text)})
                assert res.status_code == 200 and res.json()["reward"] == want, (
                    row["task_id"],
                    text,
                    res.text,
                )
