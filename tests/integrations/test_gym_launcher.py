# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""`prorl gym up`'s launcher: what it starts is recorded and stopped exactly, and a model it
cannot start is a clear error before anything runs."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from nemo_gym_prorl.integrations.gym.launcher import LaunchError, up
from nemo_gym_prorl.integrations.gym.processes import alive, record, refresh_descendants, spawn, stop_group


def test_a_recorded_group_and_its_descendants_are_stopped(tmp_path: Path) -> None:
    # A leader and a child it started: both go when the group is stopped.
    script = "import subprocess, time; subprocess.Popen(['sleep', '120']); time.sleep(120)"
    log = tmp_path / "logs" / "stand_in.log"
    proc = spawn([sys.executable, "-c", script], cwd=tmp_path, env={}, log=log)
    group = record("model", proc, log)
    for _ in range(50):
        refresh_descendants(group)
        if group.descendants:
            break
        time.sleep(0.1)
    assert group.descendants, "the child was not recorded"
    said: list[str] = []
    stop_group(group, echo=said.append, grace_s=5)
    proc.wait(timeout=5)
    assert not alive(group.pid, group.create_time)
    assert not [d for d in group.descendants if alive(d.pid, d.create_time)]
    assert said and "stopped model" in said[0]


def test_serve_model_without_the_embedded_backend_names_the_setup_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PRORL_HOME", str(tmp_path / "empty-home"))
    with pytest.raises(LaunchError, match="prorl model setup"):
        up(["math"], state_dir=tmp_path / "state", serve_model=True, echo=lambda _: None)
    # Nothing was started, so nothing is recorded as up.
    assert not (tmp_path / "state" / "state.json").exists()


def test_no_model_at_all_is_refused(tmp_path: Path) -> None:
    with pytest.raises(LaunchError, match="--model-url"):
        up(["math"], state_dir=tmp_path / "state", echo=lambda _: None)
