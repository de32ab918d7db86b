# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""`prorl demo --policy DIR` serves a trained adapter; a directory that is not one is refused
before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from nemo_gym_prorl.cli.main import build_parser
from nemo_gym_prorl.demo import run_demo


def test_a_directory_without_an_adapter_is_refused_before_anything_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_demo(quick=True, policy=tmp_path) == 2
    assert "not a LoRA adapter directory" in capsys.readouterr().out


def test_the_policy_flag_reaches_the_demo_as_a_path() -> None:
    args = build_parser().parse_args(["demo", "--quick", "--policy", "runs/policy-v000006"])
    assert args.policy == Path("runs/policy-v000006") and args.quick
