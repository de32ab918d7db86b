# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""`prorl show` and the trajectory view it shares with the HTML report."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from nemo_gym_prorl.cli import main
from nemo_gym_prorl.cli.show import show
from nemo_gym_prorl.demo.trajectory_view import TrajectoryFileError, read_views


async def test_turns_tool_calls_and_observations_are_recovered(trajectories_file: Path) -> None:
    multi, direct = read_views(trajectories_file)
    assert [t.number for t in multi.turns] == [1, 2, 3]
    assert [[s.kind for s in t.steps] for t in multi.turns] == [
        ["tool_call", "observation"], ["invalid_tool_call", "observation"], ["assistant"],
    ]  # fmt: skip
    assert multi.turns[0].steps[0].name == "ipython" and "print(6*7)" in multi.turns[0].steps[0].text
    assert all(t.generated_tokens > 0 and t.prompt_tokens > 0 for t in multi.turns)
    assert multi.facts["reward"] == 1.0 and multi.facts["stop_reason"] == "answered"
    assert multi.facts["tool_calls"] == 2 and multi.facts["turns"] == 3
    assert [s.kind for s in multi.prompt][-1] == "user"
    assert len(direct.turns) == 1 and direct.facts["tool_calls"] == 0


async def test_prorl_show_prints_every_turn(trajectories_file: Path) -> None:
    out = io.StringIO()
    assert show(trajectories_file, out=out) == 0
    text = out.getvalue()
    assert text.count("turn 1:") == 2 and "turn 3:" in text
    assert "call ipython:" in text and "BAD CALL" in text and "\\boxed{42}" in text
    assert "stop_reason=answered" in text and "reward=1.0" in text
    assert "\033[" not in text  # no colour when not a terminal


async def test_prorl_show_one_line_through_the_cli(trajectories_file: Path, capsys) -> None:
    assert main(["show", str(trajectories_file), "--line", "2"]) == 0
    text = capsys.readouterr().out
    assert "#2 prorl_math" in text and "#1 " not in text


def test_bad_files_get_a_clear_error(tmp_path: Path, capsys) -> None:
    assert show(tmp_path / "missing.jsonl") == 2
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"reward": 1}\n')
    assert show(bad) == 2
    assert "not a rollout record" in capsys.readouterr().err
    bad.write_text("{oops\n")
    with pytest.raises(TrajectoryFileError, match=r"bad\.jsonl:1: not JSON"):
        list(read_views(bad))
