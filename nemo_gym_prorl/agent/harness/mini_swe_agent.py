# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""mini-swe-agent (the PyPI package, unchanged) as a rollout's agent.

Its `DefaultAgent`, its model class (litellm, pointed at the rollout's door), its own config file
(prompts, action parsing, step and cost limits) drive the rollout. Only its environment is ours:
`SandboxEnvironment` implements mini-swe-agent's environment protocol (`execute`,
`get_template_vars`, `serialize`) over the rollout's sandbox, with the package's own submission
rule (a command whose output starts with `COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`).

Why beside the sandbox and not inside it: the harness is trusted code from a lock, its model
calls need a network path the sandbox must not have, and its dependencies (litellm) need not
exist in any task image. What the policy writes (every command) runs inside the sandbox, with
the sandbox's limits and no network. The harness itself runs in a process of its own
(`agent.harness.process`), so the package is imported there and never in the service.

The package reads its settings from the environment when it is imported and when it calls the
model; `_settings(home)` holds those this harness relies on, which go into its process's
environment (never the service's):
- no retries of a model call (`MSWEA_MODEL_RETRY_STOP_AFTER_ATTEMPT=1`): the backend pool retries
  what can be retried, and a harness retry would sample (and record) a call twice;
- cost tracking errors ignored: a local policy has no price;
- litellm's price list from its package, not the network; no start-up banner; a config folder in
  the process's private home (the package reads a `.env` from it, which must not be a user's).
"""

from __future__ import annotations

import importlib.util
import os
import platform
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field

from nemo_gym_prorl.agent.harness.base import Commands, HarnessRun, HarnessTask
from nemo_gym_prorl.agent.loop import StopReason
from nemo_gym_prorl.assets import configs_dir

SUBMIT_MARKER = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"

# mini-swe-agent's exit statuses, in the project's stop reasons.
STOP_REASONS: dict[str, StopReason] = {
    "Submitted": "submitted",
    "LimitsExceeded": "max_turns",
    "TimeExceeded": "time_budget",
    "RepeatedFormatError": "model_error",
    "ContextWindowExceededError": "context_length",
}


def _settings(home: Path) -> dict[str, str]:
    """The package's settings, for the environment of the harness's process (`home`: its
    private home directory)."""
    return {
        "MSWEA_MODEL_RETRY_STOP_AFTER_ATTEMPT": "1",
        "MSWEA_COST_TRACKING": "ignore_errors",
        "MSWEA_SILENT_STARTUP": "1",
        "MSWEA_GLOBAL_CONFIG_DIR": str(home / ".config" / "mini-swe-agent"),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    }


def _config_path(spec: str) -> Path:
    """The config file `spec` names, found as the package's `get_config_path` finds it, without
    importing the package (its import reads a `.env` into the importing process's environment)."""
    package = importlib.util.find_spec("minisweagent")
    if package is None or not package.submodule_search_locations:
        raise ValueError("mini-swe-agent is not installed (pip install mini-swe-agent)")
    builtin = Path(next(iter(package.submodule_search_locations))) / "config"
    path = Path(spec)
    if path.suffix != ".yaml":
        path = path.with_suffix(".yaml")
    candidates = [
        path,
        Path(os.getenv("MSWEA_CONFIG_DIR", ".")) / path,
        builtin / path,
        builtin / "extra" / path,
        builtin / "benchmarks" / path,
    ]
    for candidate in candidates:
        if candidate.is_file():
            return candidate.resolve()
    raise ValueError(f"no mini-swe-agent config file {spec!r} (looked for {', '.join(map(str, candidates))})")


class MiniSweAgentOptions(BaseModel):
    """mini-swe-agent as a task's agent (`tasks.<name>.options.harness`)."""

    model_config = ConfigDict(extra="forbid")

    name: Literal["mini_swe_agent"] = "mini_swe_agent"
    config: str = Field(
        "swebench_backticks.yaml",
        description="a config file of the project's configs/harness/ (mini_swe_agent_math.yaml: short "
        "templates for the embedded model), else of the package (swebench_backticks.yaml: one bash block per "
        "reply; swebench.yaml: a bash tool call), or a path to one's own",
    )
    model_class: str = Field(
        "litellm_textbased", description="the package's model class for that config (litellm: tool calls)"
    )
    command_timeout_s: float = Field(60.0, gt=0, description="per command (the config's own, at most)")


def config_spec(config: str) -> str:
    """The spec the package's loader reads for `config`: a file of the project's
    configs/harness/ by that name, else `config` itself (a package config or a path)."""
    shipped = configs_dir() / "harness" / config
    return str(shipped) if shipped.is_file() else config


class SandboxEnvironment:
    """mini-swe-agent's environment protocol over a rollout's sandbox."""

    def __init__(self, commands: Commands, **config: Any) -> None:
        self.commands = commands
        self.config = config  # the config file's environment section, for its templates

    def execute(self, action: dict[str, Any], cwd: str = "", *, timeout: int | None = None) -> dict[str, Any]:
        from minisweagent.exceptions import Submitted

        # The sandbox's workspace is the working directory (SWE: /testbed, as the package's
        # configs assume), not the config's `cwd`, which names a directory of its own images.
        result = self.commands.run(str(action.get("command", "")), cwd=cwd or None, timeout_s=timeout)
        output: dict[str, Any] = {
            "output": result.stdout + result.stderr,
            "returncode": result.exit_code,
            "exception_info": (
                f"The command timed out after {self.commands.timeout_s:g} s and was killed."
                if result.timed_out
                else ""
            ),
        }
        lines = output["output"].lstrip().splitlines(keepends=True)
        if lines and lines[0].strip() == SUBMIT_MARKER and result.exit_code == 0:
            submission = "".join(lines[1:])
            raise Submitted(
                {
                    "role": "exit",
                    "content": submission,
                    "extra": {"exit_status": "Submitted", "submission": submission},
                }
            )
        return output

    def get_template_vars(self, **kwargs: Any) -> dict[str, Any]:
        # What the package's templates may name: the config, the machine (`system`, `release`,
        # ...) as the sandbox reports it (it shares the host's kernel), and the call's own values.
        return {**self.config, **platform.uname()._asdict(), **kwargs}

    def serialize(self) -> dict[str, Any]:
        return {"info": {"config": {"environment": dict(self.config), "environment_type": "prorl-sandbox"}}}


def _completion_tokens(message: dict[str, Any]) -> int:
    """The tokens the server said it generated for one of the package's model messages."""
    response = (message.get("extra") or {}).get("response")
    usage = response.get("usage") if isinstance(response, dict) else None
    return int((usage or {}).get("completion_tokens") or 0)


class MiniSweAgent:
    """The harness (see `agent.harness.base.Harness`)."""

    name = "mini_swe_agent"

    def __init__(self, options: MiniSweAgentOptions | None = None) -> None:
        options = options or MiniSweAgentOptions()
        # Read when the config loads: an unknown config file is a configuration error, not a
        # rollout's. Its absolute path goes to the harness's process, which is shown the file.
        given = options.config
        path = _config_path(given if Path(given).is_absolute() else config_spec(given))
        self.options = options.model_copy(update={"config": str(path)})
        self.files = (path,)
        self.config: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8")) or {}

    def environment(self, home: Path) -> dict[str, str]:
        """Its settings, for its process's environment."""
        return _settings(home)

    def preload(self) -> None:
        """The imports every rollout makes (litellm alone is ~5 s of CPU), made once by the
        harness's fork server, which every rollout's process is forked from."""
        import litellm  # noqa: F401
        from minisweagent.agents.default import DefaultAgent  # noqa: F401
        from minisweagent.models import get_model  # noqa: F401

    def run(self, task: HarnessTask) -> HarnessRun:
        import litellm  # imported in the harness's process, never in the service's
        from minisweagent.agents.default import DefaultAgent
        from minisweagent.models import get_model

        litellm.suppress_debug_info = True  # its "Provider List" banner on every cost lookup

        model_config = {
            **self.config.get("model", {}),
            "model_name": f"hosted_vllm/{task.model}",
            "model_class": self.options.model_class,
            "cost_tracking": "ignore_errors",
        }
        model_config["model_kwargs"] = {
            **model_config.get("model_kwargs", {}),
            **task.extra.get("model_kwargs", {}),  # e.g. sampling, for a harness not behind the endpoint
            "api_base": task.base_url,
            "api_key": task.api_key,
        }
        environment = {
            k: v for k, v in self.config.get("environment", {}).items() if k != "environment_class"
        }
        agent_config = {**self.config.get("agent", {})}
        # The package's step limit, within the rollout's budget of model calls.
        own_limit = int(agent_config.get("step_limit") or 0)
        agent_config["step_limit"] = min(own_limit, task.max_calls) if own_limit else task.max_calls
        agent_config.pop("output_path", None)
        agent = DefaultAgent(
            get_model(config=model_config), SandboxEnvironment(task.commands, **environment), **agent_config
        )
        try:
            info = agent.run(task.prompt)
        except Exception as exc:  # the package re-raises what ended it (a refused call): the run ended
            info = {"exit_status": type(exc).__name__, "submission": ""}
        status = str(info.get("exit_status", ""))
        return HarnessRun(
            name=self.name,
            stop_reason=STOP_REASONS.get(status, "model_error"),
            exit_status=status,
            submission=info.get("submission") or None,
            generated_tokens=sum(_completion_tokens(m) for m in agent.messages),
            # Its conversation as the model saw it (the closing `exit` record is the harness's own).
            messages=[
                {k: v for k, v in m.items() if k != "extra"}
                for m in agent.messages
                if m.get("role") != "exit"
            ],
        )
