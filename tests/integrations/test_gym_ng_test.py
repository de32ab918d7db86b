# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Every resources server's tests and the environment server's pass the NeMo Gym way: `ng_test`, in the
project's one venv."""

from __future__ import annotations

from pathlib import Path

import pytest

from nemo_gym_prorl.integrations.gym.launcher import LaunchError, run_server_tests


@pytest.mark.bwrap
@pytest.mark.slow
def test_ng_test_passes_for_all_four_servers_and_the_environment_server(tmp_path: Path) -> None:
    lines: list[str] = []
    failed = run_server_tests(["mixed"], state_dir=tmp_path, echo=lines.append)
    assert failed == 0, "\n".join(lines)
    assert sum("ok:" in line and "passed" in line for line in lines) == 5
    assert any("ok: environment_servers/prorl_pipeline" in line for line in lines), lines


def test_unknown_domains_are_refused(tmp_path: Path) -> None:
    with pytest.raises(LaunchError, match="unknown domain"):
        run_server_tests(["chess"], state_dir=tmp_path)
