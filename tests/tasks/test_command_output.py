# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""`command_output`: rows carry the real output of their command; exact match is graded."""

from __future__ import annotations

import subprocess

from nemo_gym_prorl.tasks.command_output import CommandOutputTask, make_rows


def test_rows_are_deterministic_and_expected_output_is_what_the_command_prints() -> None:
    rows = make_rows(6)
    assert rows == make_rows(6)
    assert len({r["instance_id"] for r in rows}) == 6
    for row in rows:
        printed = subprocess.run(["bash", "-c", row["command"]], capture_output=True, text=True).stdout
        assert row["expected_output"] == printed.strip()
        assert row["command"] in row["responses_create_params"]["input"][0]["content"]


async def test_exact_answers_score_one_and_anything_else_zero() -> None:
    task = CommandOutputTask()
    row = make_rows(1)[0]
    expected = row["expected_output"]
    assert (await task.evaluate(row, expected)).reward == 1.0
    assert (await task.evaluate(row, f"  `{expected}`\n")).reward == 1.0
    assert (await task.evaluate(row, f"```\n{expected}\n```")).reward == 1.0
    wrong = await task.evaluate(row, expected + "0")
    assert wrong.reward == 0.0 and wrong.reason == "wrong_answer"
    assert (await task.evaluate(row, None)).reason == "no_answer"
    assert (await task.evaluate({}, "x")).reason == "bad_row"
