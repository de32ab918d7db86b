# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The servers' tests pass the NeMo Gym way: `ng_test`, in the project's one venv."""

from __future__ import annotations

from pathlib import Path

import pytest

from nemo_gym_prorl.assets import project_root
from nemo_gym_prorl.integrations.gym.launcher import (
    ENVIRONMENT_SERVER_DIR,
    LaunchError,
    run_server_tests,
    server_test_dirs,
)


@pytest.mark.bwrap
@pytest.mark.slow
def test_ng_test_passes_for_a_resources_server_and_the_environment_server(tmp_path: Path) -> None:
    # The suite runs every server's tests itself; this checks Gym's own door to them, on one domain.
    lines: list[str] = []
    failed = run_server_tests(["math"], state_dir=tmp_path, echo=lines.append)
    assert failed == 0, "\n".join(lines)
    assert sum("ok:" in line and "passed" in line for line in lines) == 2
    assert any("ok: resources_servers/prorl_math" in line for line in lines), lines
    assert any("ok: environment_servers/prorl_pipeline" in line for line in lines), lines


def test_mixed_tests_all_four_resources_servers_and_the_environment_server() -> None:
    assert server_test_dirs(["mixed"]) == [
        "resources_servers/prorl_math",
        "resources_servers/prorl_stem",
        "resources_servers/prorl_code",
        "resources_servers/prorl_swe",
        ENVIRONMENT_SERVER_DIR,
    ]
    assert all((project_root() / folder / "tests").is_dir() for folder in server_test_dirs(["mixed"]))


def test_unknown_domains_are_refused(tmp_path: Path) -> None:
    with pytest.raises(LaunchError, match="unknown domain"):
        run_server_tests(["chess"], state_dir=tmp_path)
