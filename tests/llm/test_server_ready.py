# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""A vLLM server is ready when it has served a completion, not when it first lists its model:
vLLM-CPU answers /v1/models long before its first completion (about 20 s later on two idle cores),
so a client whose timeout was set for a warm server would fail on it. A server that lists its
model but refuses to complete is no server: the start fails, saying so, and stops it.

The server here is a stand-in launched exactly as vLLM is (`python -m
vllm.entrypoints.openai.api_server ...` under the supervisor, with the key guard's arguments)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import psutil
import pytest

from nemo_gym_prorl.llm.embedded import VLLMServer
from nemo_gym_prorl.llm.embedded.server import ServerSpec, ServerStartError

STAND_IN = """
import json, os, sys, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

port = int(sys.argv[sys.argv.index("--port") + 1])
log = os.environ["STAND_IN_LOG"]

class Handler(BaseHTTPRequestHandler):
    def answer(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/health":
            self.answer(200, {})
        elif self.path == "/v1/models":
            self.answer(200, {"data": [{"id": "stand-in"}]})
        else:
            self.answer(404, {})

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        with open(log, "a") as f:
            f.write(json.dumps({"path": self.path, "body": body, "at": time.monotonic()}) + "\\n")
        if os.environ["STAND_IN_COMPLETIONS"] == "refuse":
            self.answer(500, {"error": {"message": "engine dead"}})
        else:
            time.sleep(1.0)  # a first completion slower than the readiness probes
            self.answer(200, {"choices": [{"text": "!"}]})

    def log_message(self, *args):
        pass

ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()
"""


def stand_in(tmp_path: Path, completions: str) -> tuple[VLLMServer, Path]:
    package = tmp_path / "pkg" / "vllm" / "entrypoints" / "openai"
    package.mkdir(parents=True)
    for folder in (package, package.parent, package.parent.parent):
        (folder / "__init__.py").touch()
    (package / "api_server.py").write_text(STAND_IN)
    log = tmp_path / "requests.jsonl"
    spec = ServerSpec(
        python=sys.executable,
        model=str(tmp_path),
        served_model_name="stand-in",
        log_dir=tmp_path,
        env={
            "PYTHONPATH": str(tmp_path / "pkg"),
            "STAND_IN_LOG": str(log),
            "STAND_IN_COMPLETIONS": completions,
        },
    )
    return VLLMServer(spec, ready_timeout_s=60, stop_grace_s=2), log


def requests(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_ready_means_a_completion_of_the_served_model_was_served(tmp_path: Path) -> None:
    server, log = stand_in(tmp_path, completions="serve")
    with server:
        served = requests(log)
        assert [r["path"] for r in served] == ["/v1/completions"]
        assert served[0]["body"]["model"] == "stand-in"
        assert served[0]["body"]["max_tokens"] == 1
    assert not server.running()


def test_a_server_that_lists_its_model_but_refuses_to_complete_fails_its_start_and_is_stopped(
    tmp_path: Path,
) -> None:
    server, log = stand_in(tmp_path, completions="refuse")
    server.start()
    assert server.proc is not None
    supervisor = psutil.Process(server.proc.pid)
    with pytest.raises(ServerStartError, match="first completion was refused \\(500"):
        server.wait_ready()
    assert len(requests(log)) == 1
    assert not server.running()
    assert not supervisor.is_running() or supervisor.status() == psutil.STATUS_ZOMBIE
