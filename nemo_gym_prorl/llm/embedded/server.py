# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Start, wait for and stop a vLLM OpenAI-compatible server (`prorl model serve`).

The server runs under `supervise.py` in its own session/process group, so stopping it (and
the engine/worker processes vLLM forks) is one signal to one group, and it dies with us if
this process dies. Only that group is ever signalled: nothing is killed by name.

Each start makes a new key (`VLLMServer.api_key`), and every route but `/health` refuses a request
without it (`vllm_plugins/prorl_key_guard.py`: vLLM's own `--api-key` leaves its development and
SageMaker routes open). The key reaches vLLM in its environment, never on its command line (which
any local user can read), and clients get it from the same object that gives them the URL. A
harness or sandbox on the same loopback gets neither, so it reaches the model only through the
service's recording endpoint.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Literal, Self

import httpx
from pydantic import BaseModel, Field

from nemo_gym_prorl.llm.embedded.paths import MODEL_NAME, EmbeddedLayout


class ServerStartError(RuntimeError):
    """The server exited or did not become ready in time; the message carries its log tail."""


# vLLM-CPU settings measured on 2-core/24 GB machines (see shared notes): 1 GiB KV cache,
# no OpenMP thread pinning (it fails without dedicated cores), eager mode (33 s start vs 105 s).
# fp32 and 16 sequences a step: this CPU (AVX2, no bf16 units) is no slower in fp32, whose
# log-probs match an fp32 trainer's, and 8 -> 16 sequences took the base model from 50 to 74
# generated tokens/s (README, "What each setting gave").
# The model runs in the engine-core process itself (the `uni` executor), not in a worker process
# of its own: vLLM-CPU allows it only with VLLM_ENABLE_V1_MULTIPROCESSING=0, which the API server
# (AsyncLLM always starts its engine core as a process) does not otherwise read. One process fewer
# to import torch and vLLM: ready in 31 s instead of 41 s, 31 CPU s instead of 43, and without the
# executor's message queue between engine core and worker 140 generated tokens/s instead of 110
# (16 concurrent requests of 64 tokens, SmolLM2-135M, 2 cores).
CPU_ENV = {
    "HF_HUB_OFFLINE": "1",
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "VLLM_CPU_OMP_THREADS_BIND": "nobind",
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
}
CPU_MAX_NUM_SEQS = 16
CPU_ARGS = [
    "--dtype",
    "float32",
    "--max-num-seqs",
    str(CPU_MAX_NUM_SEQS),
    "--enforce-eager",
    "--distributed-executor-backend",
    "uni",
]
CPU_MAX_MODEL_LEN = 2048

# The ranks vLLM 0.32 accepts for --max-lora-rank (vllm/config/lora.py).
LoraRank = Literal[1, 8, 16, 32, 64, 128, 256, 320, 512]


class LoraServing(BaseModel):
    """Serve LoRA adapters that a trainer loads at run time (`POST /v1/load_lora_adapter`).

    Off unless given: with LoRA on, vLLM-CPU turns compilation off and generation with an
    adapter is about 2x slower (measured on SmolLM2-135M), so a server that only serves the
    base model should not pay for it."""

    max_lora_rank: LoraRank = Field(16, description="the largest adapter rank it can load")
    max_loras: int = Field(2, ge=1, le=64, description="adapters resident at once (old + new policy)")

    def args(self) -> list[str]:
        return [
            "--enable-lora",
            "--max-lora-rank",
            str(self.max_lora_rank),
            "--max-loras",
            str(self.max_loras),
        ]

    def env(self) -> dict[str, str]:
        # Without it vLLM refuses load_lora_adapter/unload_lora_adapter at run time.
        return {"VLLM_ALLOW_RUNTIME_LORA_UPDATING": "True"}


# In-place weight reload (`/collective_rpc` -> `reload_weights`, `/reset_prefix_cache`): vLLM
# 0.32 serves these routes only in its development mode, which also opens /sleep, /wake_up,
# /server_info and RL routes. The server's key guards every one of them (`keyed_launch`).
WEIGHT_RELOAD_ENV = {"VLLM_SERVER_DEV_MODE": "1"}

# The middleware that makes every route but /health ask for the key; vLLM imports it by name from
# this folder, put first on its PYTHONPATH.
KEY_GUARD_DIR = Path(__file__).with_name("vllm_plugins")
KEY_GUARD = "prorl_key_guard.RequireKey"
KEY_ENV = "VLLM_API_KEY"


def new_api_key() -> str:
    """A key for one server start."""
    return secrets.token_urlsafe(32)


def keyed_launch(cmd: list[str], env: dict[str, str], api_key: str) -> tuple[list[str], dict[str, str]]:
    """`cmd` and `env` of a vLLM OpenAI server, made to refuse every request without `api_key`
    but `GET /health`. The key goes in the environment: a command line is readable by every
    local user (`ps`), a process's environment only by its own user."""
    path = os.pathsep.join(p for p in (str(KEY_GUARD_DIR), env.get("PYTHONPATH", "")) if p)
    return [*cmd, "--middleware", KEY_GUARD], {**env, KEY_ENV: api_key, "PYTHONPATH": path}


def write_key_file(path: Path, api_key: str) -> None:
    """`api_key` in `path`, readable by this user alone from its first byte (a file made
    world-readable and then narrowed would leave a window)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)  # a file left by an earlier server: created anew with our mode
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(api_key + "\n")


def bearer(api_key: str | None) -> dict[str, str]:
    """The headers that present `api_key` (none without one)."""
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


class ServerSpec(BaseModel):
    """Everything needed to launch one vLLM server."""

    python: str = Field(description="an interpreter that can import vllm")
    model: str = Field(description="model directory (or any id vLLM can load offline)")
    served_model_name: str
    host: str = "127.0.0.1"
    port: int = 0  # 0: pick a free port at start
    max_model_len: int | None = None
    extra_args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    log_dir: Path | None = Field(None, description="where vllm-<port>.log goes (default: $TMPDIR)")

    def command(self, port: int) -> list[str]:
        # `python -m ...`: the `vllm` console script fails for the vllm-cpu distribution.
        cmd = [
            self.python,
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            self.model,
            "--served-model-name",
            self.served_model_name,
            "--host",
            self.host,
            "--port",
            str(port),
        ]
        if self.max_model_len is not None:
            cmd += ["--max-model-len", str(self.max_model_len)]
        return cmd + list(self.extra_args)


def embedded_spec(
    layout: EmbeddedLayout | None = None,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    served_model_name: str | None = None,
    model: str | None = None,
    extra_args: list[str] | None = None,
    lora: LoraServing | None = None,
    weight_reload: bool = False,
) -> ServerSpec:
    """The default backend: vllm-cpu from the embedded venv serving SmolLM2-135M-Instruct
    (or `model`, another local directory, on the same CPU runtime). `lora`: also serve
    adapters loaded at run time; `weight_reload`: let full weights be published in place
    (both off by default)."""
    layout = layout or EmbeddedLayout.default()
    if not layout.is_ready():
        raise ServerStartError("the embedded backend is not set up; run `prorl model setup` first")
    return ServerSpec(
        python=str(layout.python),
        model=model or str(layout.model_dir),
        served_model_name=served_model_name or MODEL_NAME,
        host=host,
        port=port,
        max_model_len=CPU_MAX_MODEL_LEN,
        extra_args=[*CPU_ARGS, *(lora.args() if lora else []), *(extra_args or [])],
        env={**CPU_ENV, **(lora.env() if lora else {}), **(WEIGHT_RELOAD_ENV if weight_reload else {})},
        log_dir=layout.logs,
    )


def installed_vllm_spec(
    model: str,
    *,
    python: str | None = None,
    host: str = "127.0.0.1",
    port: int = 0,
    served_model_name: str | None = None,
    max_model_len: int | None = None,
    extra_args: list[str] | None = None,
) -> ServerSpec:
    """A user model on the `vllm` installed in this environment (GPU machines)."""
    python = python or sys.executable
    if python == sys.executable and importlib.util.find_spec("vllm") is None:
        raise ServerStartError(
            f"vllm is not installed for {sys.executable}; install it (GPU: `pip install vllm`) or pass "
            "--python /path/to/python-with-vllm"
        )
    return ServerSpec(
        python=python,
        model=model,
        served_model_name=served_model_name or Path(model.rstrip("/")).name,
        host=host,
        port=port,
        max_model_len=max_model_len,
        extra_args=list(extra_args or []),
        env={"VLLM_NO_USAGE_STATS": "1"},
    )


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class VLLMServer:
    """One vLLM server process tree. `with VLLMServer(spec) as server:` its clients take
    `server.base_url` and `server.api_key` (made at each start; every route but /health asks
    for it)."""

    def __init__(
        self,
        spec: ServerSpec,
        *,
        ready_timeout_s: float = 600.0,
        stop_grace_s: float = 20.0,
        api_key: str | None = None,
    ) -> None:
        """`api_key`: the key to serve with, for an owner that starts several servers behind one
        pool (which sends one key); None: a new one at each start."""
        self.spec = spec
        self._given_key = api_key
        self.ready_timeout_s = ready_timeout_s
        self.stop_grace_s = stop_grace_s
        self.port = spec.port or 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = Path("/dev/null")  # set by start(), once the port is known
        self.rpc_dir: Path | None = None  # this server's own ZMQ socket folder, while it runs
        self.api_key: str | None = None  # set by start(): what every client must present

    @property
    def base_url(self) -> str:
        """The OpenAI base URL clients use (`.../v1`)."""
        return f"http://{self.spec.host}:{self.port}/v1"

    @property
    def root_url(self) -> str:
        return f"http://{self.spec.host}:{self.port}"

    @property
    def auth_headers(self) -> dict[str, str]:
        """What a request to this server must carry."""
        return bearer(self.api_key)

    def start(self) -> None:
        if self.proc is not None:
            return
        self.port = self.spec.port or free_port(self.spec.host)
        log_dir = self.spec.log_dir or Path(os.environ.get("TMPDIR", "/tmp"))
        log_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = log_dir / f"vllm-{self.port}.log"
        supervisor = Path(__file__).with_name("supervise.py")
        self.api_key = self._given_key or new_api_key()
        # This process's own environment does not get the key: what it starts later (a harness, a
        # sandbox) must not inherit it.
        server_cmd, env = keyed_launch(
            self.spec.command(self.port), {**os.environ, **self.spec.env}, self.api_key
        )
        cmd = [sys.executable, str(supervisor), str(os.getpid()), str(self.stop_grace_s), "--", *server_cmd]
        self.rpc_dir = private_rpc_dir(env)
        with open(self.log_path, "wb") as log:
            # start_new_session: the supervisor leads a new process group, which the terminal's
            # Ctrl-C does not reach; we stop it ourselves, cleanly, in stop().
            self.proc = subprocess.Popen(
                cmd,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
            )

    def wait_ready(self) -> None:
        """Block until /health and /v1/models answer 200 and a first completion is served; raise
        with the log tail otherwise."""
        assert self.proc is not None, "start() first"
        deadline = time.monotonic() + self.ready_timeout_s
        with httpx.Client(timeout=2.0) as client:
            while True:
                code = self.proc.poll()
                if code is not None:
                    raise ServerStartError(f"vLLM exited with code {code} during start-up\n{self.log_tail()}")
                if self.answers(client):
                    break
                if time.monotonic() > deadline:
                    self.stop()
                    raise ServerStartError(
                        f"vLLM did not become ready within {self.ready_timeout_s:.0f}s\n{self.log_tail()}"
                    )
                time.sleep(0.5)
        try:
            self.warm_up(timeout_s=max(deadline - time.monotonic(), 30.0))
        except ServerStartError:
            self.stop()
            raise

    def warm_up(self, *, timeout_s: float) -> None:
        """Serve one one-token completion. vLLM-CPU answers /v1/models before it has served
        anything, and its first completion then takes about 20 s on two idle cores (several times
        that on a busy machine): paid here, in the start-up's own time, rather than by the first
        client, whose request timeout was set for a warm server."""
        body = {"model": self.spec.served_model_name, "prompt": "Hello", "max_tokens": 1, "temperature": 0}
        try:
            answer = httpx.post(
                self.base_url + "/completions", json=body, headers=self.auth_headers, timeout=timeout_s
            )
        except httpx.HTTPError as exc:
            raise ServerStartError(
                f"vLLM answered /v1/models but its first completion failed: {type(exc).__name__}: {exc}\n"
                f"{self.log_tail()}"
            ) from None
        if answer.status_code != 200:
            raise ServerStartError(
                f"vLLM answered /v1/models but its first completion was refused "
                f"({answer.status_code}: {answer.text[:300]})\n{self.log_tail()}"
            )

    def answers(self, client: httpx.Client) -> bool:
        """Whether /health and /v1/models both answer 200 now."""
        with contextlib.suppress(httpx.HTTPError):
            return (
                client.get(self.root_url + "/health").status_code == 200
                and client.get(self.root_url + "/v1/models", headers=self.auth_headers).status_code == 200
            )
        return False

    def stop(self) -> None:
        """SIGTERM to the server's process group, SIGKILL after the grace period. Idempotent."""
        proc, self.proc = self.proc, None
        if proc is not None:
            _stop_group(proc, grace_s=self.stop_grace_s)
        rpc_dir, self.rpc_dir = self.rpc_dir, None
        if rpc_dir is not None:
            shutil.rmtree(rpc_dir, ignore_errors=True)

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "".join(text.splitlines(keepends=True)[-lines:])

    def __enter__(self) -> Self:
        self.start()
        try:
            self.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def private_rpc_dir(env: dict[str, str]) -> Path | None:
    """Give the vLLM server that `env` will start a new folder of its own for the ZMQ sockets its
    processes talk over (sets VLLM_RPC_BASE_PATH in `env`), and return it, to be removed once the
    server is stopped: by default vLLM names them in the temp dir itself and leaves them there.
    None where `env` already names a folder, or where the temp dir's path is so long that a
    socket path in a subfolder would pass the kernel's limit (108 bytes, of which a socket's name
    takes 37): vLLM then does as it would."""
    if "VLLM_RPC_BASE_PATH" in env or len(tempfile.gettempdir()) + len("/prorl-vllm-12345678") + 37 >= 108:
        return None
    folder = Path(tempfile.mkdtemp(prefix="prorl-vllm-"))
    env["VLLM_RPC_BASE_PATH"] = str(folder)
    return folder


def _stop_group(proc: subprocess.Popen[bytes], *, grace_s: float) -> None:
    pgid = proc.pid  # the supervisor is its group's leader (start_new_session)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace_s + 5)
    # Whatever is left of the group (the supervisor normally SIGKILLs it already).
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)


@contextlib.contextmanager
def serve_embedded(**kwargs: object) -> Iterator[VLLMServer]:
    """The embedded default backend, ready to use, stopped on exit."""
    with VLLMServer(embedded_spec(**kwargs)) as server:  # type: ignore[arg-type]
        yield server
