# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""How rollouts reach the policy: the settings (`LLMConfig`) and what is built from them
(`LLMAccess`: a shared backend pool, its dialect, the served model name, sampling defaults).

`prorl serve`, the NeMo Gym agent and the benchmarks all build their access here, from one
`LLMConfig`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx
from pydantic import ConfigDict, Field

from nemo_gym_prorl.llm.dialects import ConstrainedToolCalls, Dialect, DialectName, make_dialect
from nemo_gym_prorl.llm.errors import InferenceError
from nemo_gym_prorl.llm.pool import LLMBackendPool, PoolConfig
from nemo_gym_prorl.llm.records import SamplingParams
from nemo_gym_prorl.llm.toolcalls import ToolCallFormatChoice

ToolPromptStyle = Literal["system", "template"]


class LLMConfig(PoolConfig):
    """The policy the rollouts talk to: backend URLs and pool knobs (`PoolConfig`), plus how to
    talk to them. `backends` may start empty and be filled at runtime (/v1/backends,
    /add_llm_server), as a trainer does once its vLLM ranks are up."""

    model_config = ConfigDict(extra="forbid")

    dialect: DialectName = Field(
        "vllm",
        description="vllm: token-id prompts on /v1/completions; nemo_rl: NeMo RL's policy server; or "
        "an import target package.module:factory building a Dialect of one's own",
    )
    model: str | None = Field(None, description="Served model name; None: asked from the first backend.")
    max_model_len: int | None = Field(None, gt=0, description="None: learned from the server.")
    sampling: SamplingParams = Field(default_factory=SamplingParams)
    tool_prompt: ToolPromptStyle = Field(
        "system", description="Describe tools in the system prompt (any model) or via the chat template."
    )
    tool_call_format: ToolCallFormatChoice = Field(
        "auto",
        description="how the model writes tool calls: hermes, llama3_json, mistral, qwen3_coder, pythonic, "
        "or an import target package.module:parse; auto: the constrained format if on, else what the "
        "chat template of a local model directory (`model`) teaches, else hermes",
    )
    constrained: ConstrainedToolCalls = Field(
        default_factory=ConstrainedToolCalls,
        description="constrained tool calling (vllm dialect): well-formed calls forced by a structural "
        "tag; log-probs then come from the constrained distribution (demos, smoke tests, cold-start data)",
    )


class ModelDiscoveryError(InferenceError):
    """No served model name was configured and no backend would say which it serves."""


@dataclass
class LLMAccess:
    """How rollouts reach the policy: a shared pool, its dialect, the served model name, and
    whether tools are described in the system prompt or through the server's chat template."""

    pool: LLMBackendPool
    dialect: Dialect
    model: str | None = None
    default_sampling: SamplingParams = field(default_factory=SamplingParams)
    max_model_len: int | None = None
    tool_prompt: ToolPromptStyle = "system"

    @classmethod
    def from_config(cls, settings: LLMConfig) -> LLMAccess:
        """A new pool over `settings.backends` (not started: `await access.pool.start()` inside
        the serving event loop, which its HTTP client binds to)."""
        return cls(
            pool=LLMBackendPool(settings),
            dialect=make_dialect(
                settings.dialect,
                tool_call_format=settings.tool_call_format,
                constrained=settings.constrained,
                model_dir=settings.model,
            ),
            model=settings.model,
            default_sampling=settings.sampling,
            max_model_len=settings.max_model_len,
            tool_prompt=settings.tool_prompt,
        )

    async def model_name(self) -> str:
        """The name a new turn requests: the current policy version's once one is published
        (`pool.policy`), else the base model's (configured, or the one the first healthy
        backend lists at /v1/models)."""
        if self.model is None:
            self.model = await discover_model(self.pool)
        return self.pool.policy.served_model(self.model)

    def sampling_for(self, overrides: Mapping[str, Any]) -> SamplingParams:
        """The trainer's per-job sampling fields override the defaults, validated (a bad value
        fails the job with the reason); unknown ones are ignored (ProRL clients send extras
        such as `stop`)."""
        known = {k: v for k, v in overrides.items() if k in SamplingParams.model_fields}
        return SamplingParams.model_validate({**self.default_sampling.model_dump(), **known})


async def discover_model(pool: LLMBackendPool) -> str:
    for endpoint in pool.stats().endpoints:
        if not endpoint.healthy:
            continue
        try:
            response = await pool.client.get(
                f"{endpoint.address}/v1/models", headers=pool.auth_headers, timeout=10
            )
            # vLLM lists loaded LoRA adapters too, each with its base model as `parent`.
            models = [m for m in response.json().get("data") or [] if not m.get("parent")]
            if response.status_code == 200 and models and isinstance(models[0].get("id"), str):
                return str(models[0]["id"])
        except (httpx.HTTPError, ValueError, AttributeError):
            continue
    raise ModelDiscoveryError(
        "no model name configured (llm.model) and no healthy backend lists one at /v1/models"
    )
