# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Rollout records for the trajectory views, made by the real Gym agent runtime with the scripted
model and the in-memory resources server of the integration tests."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integrations"))

from support.gym_fakes import FakeResources, ScriptedDialect, scripted_runtime

from nemo_gym_prorl.integrations.gym.config import ProRLAgentSettings
from nemo_gym_prorl.pipeline import PipelineConfig

TOOL = {"type": "function", "name": "ipython", "description": "run python", "strict": False,
        "parameters": {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]}}  # fmt: skip
CALL = '<tool_call>\n{"name": "ipython", "arguments": {"code": "print(6*7)"}}\n</tool_call>'
BROKEN = "<tool_call>\n{not json\n</tool_call>"
ANSWER = "The computation printed 42, so the answer is \\boxed{42}."


def _row(task_id: str) -> dict:
    return {
        "responses_create_params": {"input": [{"role": "user", "content": "What is 6*7? <b>bold</b>"}],
                                    "tools": [TOOL], "temperature": 1.0, "max_output_tokens": 64},
        "data_source": "prorl_math", "task_id": task_id, "expected_answer": "42",
    }  # fmt: skip


async def _records() -> list[dict]:
    settings = ProRLAgentSettings(pipeline=PipelineConfig(init_workers=1, run_workers=1, eval_workers=1))
    records = []
    for task_id, replies in (("multi", [CALL, BROKEN, ANSWER]), ("direct", [ANSWER])):
        runtime = scripted_runtime(settings, ScriptedDialect(replies), lambda: FakeResources(reward=1.0))
        try:
            outcome = await runtime.run(_row(task_id))
        finally:
            await runtime.close()
        assert outcome.status == 200, outcome.body
        records.append(outcome.body)
    return records


@pytest.fixture
async def trajectories_file(tmp_path: Path) -> Path:
    """Two rollouts: three turns (a tool call, a malformed call, the answer), and a direct answer."""
    path = tmp_path / "trajectories.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in await _records()))
    return path
