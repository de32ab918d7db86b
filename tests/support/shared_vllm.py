# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""One real vLLM-CPU server for every `pytest -n N` worker, not one per worker.

A start costs about 30 s of CPU (two processes each importing vllm), and on 2 cores every
extra one slows all the others. So under pytest-xdist the controller (the process that outlives
the workers) owns the server:

- each worker, at collection, leaves a `wanted` file in a directory the controller handed it
  when some collected test uses `real_vllm`;
- the controller, once a worker reports its collection, starts the server if it is wanted (the
  server's supervisor watches the controller, so it dies with it) and writes `server.json`
  (port, supervisor pid, log, the server's key; the directory is the controller's own, mode 0700);
- a worker's `real_vllm` waits for `server.json` and for the server to answer, then hands the
  tests a `VLLMServer` bound to that port;
- the controller stops the server when the session ends.

Without xdist (or with `-n 0`) nothing here runs: `real_vllm` starts a server of its own.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from nemo_gym_prorl.llm.embedded import EmbeddedLayout, VLLMServer, embedded_spec

WORKER_INPUT_KEY = "prorl_shared_vllm"
READY_TIMEOUT_S = 600.0


class SharedVLLMController:
    """The xdist controller's side: hands each worker the directory, starts and stops the server."""

    def __init__(self) -> None:
        self.directory: Path | None = None  # made for the first worker: a run without any has none
        self.server: VLLMServer | None = None

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        if self.directory is None:
            self.directory = Path(tempfile.mkdtemp(prefix="prorl-shared-vllm-"))
        node.workerinput[WORKER_INPUT_KEY] = str(self.directory)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        if self.directory is None or self.server is not None or not (self.directory / "wanted").exists():
            return
        layout = EmbeddedLayout.default()
        if not layout.is_ready():
            return  # the workers' fixture skips, saying why
        self.server = VLLMServer(embedded_spec(layout), ready_timeout_s=READY_TIMEOUT_S)
        self.server.start()
        assert self.server.proc is not None
        info = {
            "port": self.server.port,
            "pid": self.server.proc.pid,
            "log": str(self.server.log_path),
            "api_key": self.server.api_key,
        }
        staged = self.directory / "server.json.tmp"
        staged.touch(mode=0o600)
        staged.write_text(json.dumps(info))
        staged.rename(self.directory / "server.json")  # a worker never reads half a file

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if self.server is not None:
            self.server.stop()
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)


def shared_directory(config: pytest.Config) -> Path | None:
    """On an xdist worker, the directory its controller handed it; otherwise None."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is None or WORKER_INPUT_KEY not in workerinput:
        return None
    return Path(workerinput[WORKER_INPUT_KEY])


def mark_wanted(config: pytest.Config, items: list[pytest.Item]) -> None:
    directory = shared_directory(config)
    if directory is not None and any("real_vllm" in getattr(item, "fixturenames", ()) for item in items):
        (directory / "wanted").touch()


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE  # a zombie is not reaped yet
    except psutil.NoSuchProcess:
        return False


def attach(directory: Path, layout: EmbeddedLayout) -> VLLMServer:
    """The controller's server, once it answers; a clear error if it died or never came up."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    info_path = directory / "server.json"
    while not info_path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"the shared vLLM server was not started within {READY_TIMEOUT_S:.0f}s")
        time.sleep(0.5)
    info = json.loads(info_path.read_text())
    server = VLLMServer(embedded_spec(layout), ready_timeout_s=READY_TIMEOUT_S)
    server.port, server.log_path, server.api_key = info["port"], Path(info["log"]), info["api_key"]
    with httpx.Client(timeout=2.0) as client:
        while True:
            if not _alive(info["pid"]):
                raise RuntimeError(f"the shared vLLM server exited during start-up\n{server.log_tail()}")
            if server.answers(client):
                server.warm_up(timeout_s=max(deadline - time.monotonic(), 30.0))
                return server
            if time.monotonic() > deadline:
                raise TimeoutError(f"the shared vLLM server did not answer within {READY_TIMEOUT_S:.0f}s")
            time.sleep(0.5)
