# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Preflight for a NeMo RL recipe: would NeMo RL start it, and does it fit this project's agent?

Three layers, all without NeMo RL installed:
  1. NeMo RL's config schema (`MasterConfig` of the runner), from the record or from a NeMo RL
     checkout the user names;
  2. the runner's own checks (`rules.py`);
  3. our rules: the Gym config paths exist, the agent and resources servers named in
     `env.nemo_gym` are this project's, the agent's settings parse, the sampling parameters
     fit NeMo RL's policy server (it refuses a request whose `top_k` is set or whose
     (temperature, top_p) is neither the training nor the validation pair), and the agent answers
     infrastructure failures the way the runner survives (masked 200s for the synchronous one).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from nemo_gym_prorl.assets import project_root
from nemo_gym_prorl.integrations.nemo_rl.recipe import load_recipe
from nemo_gym_prorl.integrations.nemo_rl.rules import check_runner_rules, lookup
from nemo_gym_prorl.integrations.nemo_rl.schema import RUNNERS, Problem, load_record, validate

AGENT_NAME = "prorl_agent"
# Keys of the agent block that are its own settings (the rest are Gym's server references).
AGENT_SETTING_KEYS = ("llm", "pipeline", "agent", "rollout_timeout_s", "infrastructure_failures")
# Config files NeMo Gym itself ships; they live in Gym's checkout, not ours.
GYM_OWN_PREFIXES = ("responses_api_models/",)


@dataclass
class Report:
    recipe: str
    runner: str
    nemo_rl: str
    errors: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors

    def render(self) -> str:
        head = f"{self.recipe}: {'OK' if self.ok else 'REJECTED'} for NeMo RL {self.nemo_rl} ({self.runner} runner)"
        lines = [head]
        lines += [f"  error   [{p.source}] {p}" for p in self.errors]
        lines += [f"  warning [{p.source}] {p}" for p in self.warnings]
        return "\n".join(lines)


def detect_runner(config: Mapping[str, Any]) -> str:
    """Single controller when the recipe has its sections; else the synchronous Gym runner."""
    return (
        "single_controller" if "async_rl" in config or lookup(config, "data_plane.enabled", False) else "grpo"
    )


def _gym_blocks(config: Mapping[str, Any]) -> Mapping[str, Any]:
    gym = lookup(config, "env.nemo_gym", {})
    return gym if isinstance(gym, Mapping) else {}


def _our_rules(config: Mapping[str, Any], runner: str) -> tuple[list[Problem], list[Problem]]:
    from nemo_gym_prorl.integrations.gym.config import ProRLAgentSettings

    errors: list[Problem] = []
    warnings: list[Problem] = []
    gym = _gym_blocks(config)
    for i, rel in enumerate(gym.get("config_paths") or []):
        where = f"env.nemo_gym.config_paths[{i}]"
        if str(rel).startswith(GYM_OWN_PREFIXES):
            warnings.append(Problem(where, f"{rel} is NeMo Gym's own file; not checked here", "prorl"))
        elif not (project_root() / str(rel)).is_file():
            errors.append(Problem(where, f"{rel} does not exist under {project_root()}", "prorl"))

    agents_seen = 0
    for instance, block in gym.items():
        if not isinstance(block, Mapping):
            continue
        for kind, servers in block.items():
            if kind not in ("responses_api_agents", "resources_servers") or not isinstance(servers, Mapping):
                continue
            for name, server in servers.items():
                where = f"env.nemo_gym.{instance}.{kind}.{name}"
                if not (project_root() / kind / str(name)).is_dir():
                    errors.append(Problem(where, f"no such server in this project ({kind}/{name})", "prorl"))
                    continue
                if kind != "responses_api_agents" or not isinstance(server, Mapping):
                    continue
                agents_seen += 1
                settings = {k: server[k] for k in AGENT_SETTING_KEYS if k in server}
                try:
                    ProRLAgentSettings(**settings)
                except ValidationError as exc:
                    for err in exc.errors():
                        loc = ".".join(str(p) for p in err["loc"])
                        errors.append(Problem(f"{where}.{loc}", err["msg"], "prorl agent settings"))
                errors += _sampling_rules(config, where, server)
                answer = server.get("infrastructure_failures", "http_status")
                if runner == "grpo" and answer != "masked_result":
                    errors.append(Problem(
                        f"{where}.infrastructure_failures",
                        f"is {answer!r}; must be 'masked_result': NeMo RL's synchronous runner aborts the "
                        "training run on any non-200 from /run",
                        "prorl",
                    ))  # fmt: skip
                elif runner == "single_controller" and answer == "masked_result":
                    warnings.append(Problem(
                        f"{where}.infrastructure_failures",
                        "'masked_result' hides 5xx the single controller would retry; 'http_status' keeps them",
                        "prorl",
                    ))  # fmt: skip
    if gym and not agents_seen:
        warnings.append(
            Problem("env.nemo_gym", f"no {AGENT_NAME} block; the agent runs on its defaults", "prorl")
        )
    return errors, warnings


def _sampling_rules(config: Mapping[str, Any], where: str, server: Mapping[str, Any]) -> list[Problem]:
    from nemo_gym_prorl.llm.records import SamplingParams

    gen = lookup(config, "policy.generation", {}) or {}
    problems = []
    for key in ("top_k", "val_top_k"):
        if gen.get(key) not in (None, -1):
            problems.append(
                Problem(
                    f"policy.generation.{key}",
                    "must be null or -1: NeMo RL's policy server refuses top_k",
                    "prorl",
                )
            )
    pairs = {(gen.get("temperature"), gen.get("top_p")), (gen.get("val_temperature"), gen.get("val_top_p"))}
    if isinstance(server.get("sampling"), Mapping):
        defaults = SamplingParams()
        sampling = server["sampling"]
        pair = (sampling.get("temperature", defaults.temperature), sampling.get("top_p", defaults.top_p))
        if pair not in pairs:
            problems.append(
                Problem(
                    f"{where}.sampling",
                    f"(temperature, top_p)={pair} is neither the training nor the validation pair "
                    f"{sorted(pairs, key=str)}: NeMo RL's policy server refuses it",
                    "prorl",
                )
            )
    llm = server.get("llm") or {}
    if llm.get("source") == "policy_base_url" and llm.get("dialect", "nemo_rl") != "nemo_rl":
        problems.append(
            Problem(f"{where}.llm.dialect", "must be nemo_rl for NeMo RL's policy servers", "prorl")
        )
    return problems


def check_recipe(path: Path, *, nemo_rl: Path | None = None, runner: str | None = None) -> Report:
    """Run every layer on one recipe file."""
    config = load_recipe(path)
    runner = runner or detect_runner(config)
    if runner not in RUNNERS:
        raise ValueError(f"unknown runner {runner!r}; one of {RUNNERS}")
    schema = None
    moved: list[str] = []
    version = load_record()["nemo_rl_commit"][:9] + " (recorded)"
    if nemo_rl is not None:
        from nemo_gym_prorl.integrations.nemo_rl.derive import DirTree, derive_schema, missing_anchors

        tree = DirTree(nemo_rl)
        schema = derive_schema(tree)
        moved = missing_anchors(load_record(), tree)
        version = str(nemo_rl)
    report = Report(str(path), runner, version)
    # The runner rules are the recorded ones; say when the user's NeMo RL no longer has their source.
    report.warnings += [
        Problem("runner rules", f"may not apply to this NeMo RL: {m}", "derive") for m in moved
    ]
    report.errors += validate(config, runner, schema)
    report.errors += check_runner_rules(config, runner)
    errors, warnings = _our_rules(config, runner)
    report.errors += errors
    report.warnings += warnings
    return report
