# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""`prorl demo --environment NAME` draws its rows from dataset environments: prepared validation
rows where they exist, else the environment's example rows; an unknown name stops it at once."""

from __future__ import annotations

from pathlib import Path

import pytest

from nemo_gym_prorl.cli.main import build_parser
from nemo_gym_prorl.datasets.rows import write_jsonl
from nemo_gym_prorl.demo import run_demo
from nemo_gym_prorl.demo.rows import demo_rows


def test_environment_rows_are_its_examples_until_prepared(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    rows = demo_rows(environments=["gsm8k"])
    assert len(rows) == 2 and all(r["dataset"] == "gsm8k" for r in rows)
    prepared = [{"task_id": "prepared-1", "data_source": "prorl_math"}] * 3
    write_jsonl(tmp_path / "data" / "gsm8k" / "validation.jsonl", prepared)
    # The demo takes its two math rows from the prepared split.
    assert [r["task_id"] for r in demo_rows(environments=["gsm8k"])] == ["prepared-1"] * 2


def test_an_unknown_environment_stops_the_demo_before_anything_starts(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert run_demo(quick=True, environments=["gsm9k"]) == 2
    assert "unknown dataset environment 'gsm9k'" in capsys.readouterr().out


def test_environment_flags_accumulate_and_split_on_commas() -> None:
    args = build_parser().parse_args(
        ["demo", "--environment", "gsm8k,math_500", "--environment", "humaneval"]
    )
    assert args.environment == ["gsm8k,math_500", "humaneval"]
