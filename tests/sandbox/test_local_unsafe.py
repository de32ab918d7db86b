# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""`local_unsafe`: no isolation, but the same interface, limits and cleanup; refused for a root
service. Its behaviour runs where the service is an unprivileged user (this module is part of the
unprivileged suite, `tests/security/test_unprivileged_service.py`)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from nemo_gym_prorl.sandbox import SandboxError, SandboxSpec, open_sandbox

as_unprivileged = pytest.mark.skipif(
    os.geteuid() == 0, reason="refused as root; runs in the unprivileged suite"
)


@pytest.mark.skipif(os.geteuid() != 0, reason="the refusal is a root service's")
def test_a_root_service_refuses_it(tmp_path: Path) -> None:
    with pytest.raises(SandboxError, match="refused for a root service"):
        open_sandbox(SandboxSpec(backend="local_unsafe", root_dir=tmp_path))
    assert not list(tmp_path.iterdir())


@as_unprivileged
async def test_runs_in_the_host_workspace_with_a_clean_environment(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("LEAKY_SECRET", "x")
    with open_sandbox(SandboxSpec(backend="local_unsafe", root_dir=tmp_path, env={"TASK": "t1"})) as sb:
        result = await sb.exec("pwd; echo $TASK; echo ${LEAKY_SECRET:-unset}; echo hi > f")
        assert result.stdout.splitlines() == [str(sb.workspace), "t1", "unset"]
        assert (sb.workspace / "f").exists()


@as_unprivileged
async def test_timeout_kills_the_process_group(tmp_path: Path) -> None:
    with open_sandbox(SandboxSpec(backend="local_unsafe", root_dir=tmp_path)) as sb:
        result = await sb.exec("sleep 100 & sleep 100; echo never", timeout=0.3)
    assert result.timed_out and "never" not in result.stdout
