# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""prorl_stem through NeMo Gym's own contract checks and over HTTP."""

import asyncio
import json
from pathlib import Path

from fastapi.testclient import TestClient
from nemo_gym.verifier_fixture import exercise_verifier_fixture

from resources_servers.prorl_stem.app import VERIFIER_FIXTURE

EXAMPLES = Path(__file__).parents[1] / "data" / "example.jsonl"


def _response(text: str) -> dict:
    return {"id": "r", "created_at": 0, "model": "m", "object": "response", "parallel_tool_calls": False,
            "tool_choice": "auto", "tools": [], "output": [{"id": "m1", "type": "message", "role": "assistant",
            "status": "completed", "content": [{"type": "output_text", "text": text, "annotations": []}]}]}  # fmt: skip


def test_verifier_fixture() -> None:
    asyncio.run(exercise_verifier_fixture(VERIFIER_FIXTURE, reward_range=(0.0, 1.0), determinism="unknown"))


def test_example_rows_grade_their_own_answers() -> None:
    server = VERIFIER_FIXTURE.server_factory()
    with TestClient(server.setup_webserver()) as client:
        for line in EXAMPLES.read_text().splitlines():
            row = json.loads(line)
            gold = row["expected_answer"]
            right = f"Reasoning...\nAnswer: {gold}" if row["answer_type"] == "mc" else f"\\boxed{{{gold}}}"
            wrong = "Answer: Z" if row["answer_type"] == "mc" else "\\boxed{12345 kg}"
            for text, want in ((right, 1.0), (wrong, 0.0), ("", 0.0)):
                res = client.post("/verify", json={**row, "response": _response(text)})
                assert res.status_code == 200 and res.json()["reward"] == want, (
                    row["task_id"],
                    text,
                    res.text,
                )
