# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The NeMo Gym agent's settings: the service's own settings models (`LLMConfig`,
`PipelineConfig`, `AgentLimits`) plus where, in a Gym deployment, the model is.

The Gym agent's config (`responses_api_agents/prorl_agent/app.py`) embeds `ProRLAgentSettings`
as it is; its YAML shows only what differs from these defaults.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, field_validator

from nemo_gym_prorl.agent.harness import harness_options
from nemo_gym_prorl.agent.loop import AgentLimits
from nemo_gym_prorl.integrations.nemo_rl.result import InfrastructureFailureAnswer
from nemo_gym_prorl.llm.access import LLMConfig
from nemo_gym_prorl.llm.dialects import DialectName
from nemo_gym_prorl.pipeline import PipelineConfig
from nemo_gym_prorl.pipeline.executors import ExecutorConfig

ModelSource = Literal["auto", "backends", "policy_base_url", "model_server"]


class ModelAccessConfig(LLMConfig):
    """`LLMConfig` (backends, pool knobs, dialect, model, sampling, tool prompt) plus `source`:
    which of a Gym deployment's model addresses the backends come from."""

    model_config = ConfigDict(extra="forbid")

    source: ModelSource = Field(
        "auto",
        description="auto: `backends` if set, else the global `policy_base_url` (NeMo RL's per-rank vLLM "
        "servers), else the Gym model server named by the agent's `model_server`.",
    )
    # The one field whose default differs: left unset, the source picks the dialect
    # (`resolve_model_access` reads `model_fields_set`), so the type stays `LLMConfig`'s.
    dialect: DialectName = Field(
        "vllm",
        description="nemo_rl: /v1/chat/completions with prefix-token splicing (NeMo RL's policy server, "
        "a Gym model server); vllm: token-id prompts to /v1/completions (plain vLLM, token-exact). "
        "Not given: vllm for `backends`, nemo_rl otherwise.",
    )

    def chosen_dialect(self, for_source: str) -> str:
        """The dialect given, or the one `for_source` speaks when none was."""
        return self.dialect if "dialect" in self.model_fields_set else for_source


class ProRLAgentSettings(BaseModel):
    """The agent's own settings (everything but Gym's server references)."""

    model_config = ConfigDict(extra="forbid")

    llm: ModelAccessConfig = Field(default_factory=ModelAccessConfig)
    pipeline: PipelineConfig = Field(
        default_factory=lambda: PipelineConfig(active_time_s=3600.0),
        description="INIT/RUN/EVAL pool sizes, queue bounds, the per-rollout active-time budget",
    )
    agent: AgentLimits = Field(default_factory=lambda: AgentLimits(max_turns=16, max_time_s=1800.0))
    harness: dict[str, Any] | None = Field(
        None,
        description="an agent harness drives RUN instead of the built-in loop ({name: mini_swe_agent | "
        "openai_agents, ...its options}): its model calls through the recording endpoint, its commands "
        "through each resources server's /exec",
    )
    rollout_timeout_s: float | None = Field(None, gt=0, description="wall limit of one /run (504 after it)")

    @field_validator("harness")
    @classmethod
    def _known_harness(cls, harness: dict[str, Any] | None) -> dict[str, Any] | None:
        if harness is not None:
            harness_options(harness)
        return harness

    resources_connection_retries: int = Field(
        20,
        ge=1,
        description="refused or reset connections to a resources server retried (0.5 s apart) before the "
        "rollout fails as infrastructure (Gym alone retries them forever)",
    )
    executor: ExecutorConfig = Field(
        default_factory=ExecutorConfig,
        description="where stages run: in this process, or `kind: ray` (one rollout actor per node of "
        "the cluster named by `ray.address`, RAY_ADDRESS or Gym's ray_head_node_address)",
    )
    infrastructure_failures: InfrastructureFailureAnswer = Field(
        "http_status",
        description="5xx from /run (NeMo RL's single controller retries them) or a masked 200 result "
        "(NeMo RL's synchronous GRPO aborts training on any non-200)",
    )


class ResolvedModelAccess(NamedTuple):
    """The LLM settings with the backends, dialect and model filled in, and where they came from."""

    settings: LLMConfig
    source: str


def _url_list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value] if value.strip() and value.strip() != "???" else []
    return [str(v) for v in value if str(v).strip()]


def resolve_model_access(
    config: ModelAccessConfig, global_config: Mapping[str, Any], model_server: str | None
) -> ResolvedModelAccess:
    """Where the backends are, which dialect speaks to them, and the served model name."""
    source = config.source
    policy_urls = _url_list(global_config.get("policy_base_url"))
    if source == "auto":
        source = "backends" if config.backends else "policy_base_url" if policy_urls else "model_server"
    policy_name = global_config.get("policy_model_name")
    model = config.model or (str(policy_name) if policy_name not in (None, "", "???") else None)
    base = config.model_dump(exclude={"source", "dialect", "backends", "model"})

    def resolved(backends: list[str], dialect: str, **changes: Any) -> ResolvedModelAccess:
        fields = {**base, "backends": backends, "dialect": config.chosen_dialect(dialect), "model": model}
        return ResolvedModelAccess(LLMConfig.model_validate({**fields, **changes}), source)

    if source == "backends":
        if not config.backends:
            raise ValueError("llm.source=backends needs llm.backends")
        return resolved(list(config.backends), "vllm")
    if source == "policy_base_url":
        if not policy_urls:
            raise ValueError("llm.source=policy_base_url but the global config has no policy_base_url")
        key = config.api_key or global_config.get("policy_api_key")
        return resolved(policy_urls, "nemo_rl", api_key=key if key not in ("", "???") else None)
    if model_server is None:
        raise ValueError(
            "no llm.backends, no policy_base_url and no model_server: the agent cannot reach a model"
        )
    server = _server_config(global_config, model_server)
    if server is None or not server.get("host") or not server.get("port"):
        raise ValueError(f"model server {model_server!r} has no host/port in the global config")
    model = model or (str(server["model"]) if server.get("model") else None)
    # A Gym model server has no /health route; it is up when the head server says so.
    return resolved([f"http://{server['host']}:{server['port']}"], "nemo_rl", api_key=None, health_path=None)


def _server_config(global_config: Mapping[str, Any], instance: str) -> Mapping[str, Any] | None:
    """The inner config of a server instance (`<instance>.<type>.<impl>`)."""
    entry = global_config.get(instance)
    if not isinstance(entry, Mapping):
        return None
    for group in entry.values():
        if isinstance(group, Mapping):
            for impl in group.values():
                if isinstance(impl, Mapping):
                    return impl
    return None
