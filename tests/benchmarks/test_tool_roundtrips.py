# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The benchmark's measuring functions: they run the real thing, check its output, and clean up."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

import tool_roundtrips as bench

requires_tmux = pytest.mark.skipif(
    shutil.which("tmux") is None, reason="tmux is not installed: apt-get install tmux"
)
requires_bwrap = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="bubblewrap (`bwrap`) is not installed"
)


@requires_bwrap
@pytest.mark.bwrap
async def test_pty_roundtrips_measure_n_sub_millisecond_calls() -> None:
    times = await bench.pty_roundtrips(30)
    assert len(times) == 30 and all(t > 0 for t in times)


@requires_bwrap
@pytest.mark.bwrap
async def test_ipython_roundtrips_measure_n_calls() -> None:
    times = await bench.ipython_roundtrips(10)
    assert len(times) == 10 and all(t > 0 for t in times)


@requires_tmux
@pytest.mark.tmux
@pytest.mark.parametrize("mode", ["wait_for", "capture"])
def test_tmux_roundtrips_measure_and_kill_only_their_own_server(mode: bench.TmuxMode) -> None:
    times = bench.tmux_roundtrips(10, mode)
    assert len(times) == 10 and all(t > 0 for t in times)
    socket = f"prorl-bench-{os.getpid()}"
    probe = subprocess.run(["tmux", "-L", socket, "list-sessions"], capture_output=True, check=False)
    assert probe.returncode != 0  # the private server is gone
    assert not os.path.exists(
        os.path.join(os.environ.get("TMUX_TMPDIR") or "/tmp", f"tmux-{os.getuid()}", socket)
    )


def test_tmux_rejects_an_unknown_mode() -> None:
    with pytest.raises(ValueError, match="wait_for"):
        bench.tmux_roundtrips(1, "poll")  # type: ignore[arg-type]


def test_subprocess_roundtrips_measure_n_calls() -> None:
    times = bench.subprocess_roundtrips(10)
    assert len(times) == 10 and all(t > 0 for t in times)
