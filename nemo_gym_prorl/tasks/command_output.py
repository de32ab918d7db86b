# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""`command_output`: run a shell command and report exactly what it printed.

The simplest agentic task there is: one tool call, one answer, checked by exact match. It
exercises every part of a rollout (sandbox, shell, token session, evaluator) without
depending on a model's knowledge, so it is what the service's end-to-end proof and the
pipeline benchmark run. Rows are generated deterministically; the expected output is computed
by actually running the command on the host's shell when the row is made.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from typing import Any, ClassVar

from nemo_gym_prorl.tasks.base import BASH, EvalOutcome, TaskDomain

PROMPT = (
    "Use the bash tool to run this command: `{command}`\n"
    "Then call the submit tool with exactly what the command printed, and nothing else."
)

# Small, deterministic commands whose output a reader cannot guess without running them.
_COMMANDS = (
    "echo $(( {a} * {b} ))",
    "printf '%s-%s\\n' task {a}",
    "seq {a} {b} | wc -l",
    "echo {a}{b} | rev",
    "expr {a} + {b}",
)


def make_rows(n: int, *, seed: int = 0) -> list[dict[str, Any]]:
    """`n` Gym-format rows (task fields at the top level)."""
    rows = []
    for i in range(n):
        a, b = 3 + (7 * i + seed) % 90, 11 + (13 * i + 5 * seed) % 80
        command = _COMMANDS[i % len(_COMMANDS)].format(a=a, b=b)
        expected = subprocess.run(["bash", "-c", command], capture_output=True, text=True, check=True).stdout
        rows.append(
            {
                "responses_create_params": {
                    "input": [{"role": "user", "content": PROMPT.format(command=command)}]
                },
                "data_source": "command_output",
                "instance_id": f"command_output-{seed}-{i}",
                "command": command,
                "expected_output": expected.strip(),
            }
        )
    return rows


def _normalise(text: str) -> str:
    text = text.strip()
    if text.startswith("```") and text.endswith("```"):
        text = text.strip("`").partition("\n")[2] if "\n" in text else text.strip("`")
    return text.strip().strip("`").strip()


class CommandOutputTask(TaskDomain):
    name: ClassVar[str] = "command_output"
    data_sources: ClassVar[tuple[str, ...]] = ("command_output",)
    default_tools: ClassVar[tuple[str, ...]] = (BASH,)

    async def evaluate(
        self, row: Mapping[str, Any], final_text: str | None, artifacts: Mapping[str, Any] | None = None
    ) -> EvalOutcome:
        expected = row.get("expected_output")
        if not isinstance(expected, str):
            return EvalOutcome.zero("bad_row", "the row has no string `expected_output`")
        if final_text is None or not final_text.strip():
            return EvalOutcome.zero("no_answer")
        if _normalise(final_text) == expected.strip():
            return EvalOutcome(reward=1.0, reason="correct")
        return EvalOutcome.zero(
            "wrong_answer", f"expected {expected.strip()!r}, got {_normalise(final_text)[:200]!r}"
        )
