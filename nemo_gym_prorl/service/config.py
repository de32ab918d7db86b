# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""`prorl serve` configuration: composed with Hydra from configs/service/, validated by pydantic.

Composition: `serve.yaml` plus the config groups `sandbox=bubblewrap|apptainer|local_unsafe`
and `tasks=default|none`, then command-line overrides (`pipeline.run_workers=64`,
`+tasks.mine.handler=pkg.mod:factory`, `auth.token=...`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from nemo_gym_prorl.assets import AssetError, asset
from nemo_gym_prorl.llm.access import LLMConfig
from nemo_gym_prorl.pipeline import PipelineConfig
from nemo_gym_prorl.pipeline.executors import ExecutorConfig
from nemo_gym_prorl.sandbox import SandboxSpec
from nemo_gym_prorl.service.core import ServiceOptions
from nemo_gym_prorl.service.journal import JournalConfig

TARGET_PATTERN = r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$"


class ConfigError(ValueError):
    """The configuration cannot be composed or is invalid; the message says where and why."""


class ServerConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    host: str = Field("127.0.0.1", description="Loopback by default: exposing it is a decision.")
    port: int = Field(8000, ge=0, le=65535)
    log_level: Literal["critical", "error", "warning", "info", "debug", "trace"] = "info"


class AuthConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    token: str | None = Field(None, min_length=8, description="Bearer token required by the API.")
    token_env: str | None = Field(
        "PRORL_API_TOKEN", description="Environment variable read for the token when `token` is unset."
    )

    def resolved_token(self) -> str | None:
        if self.token:
            return self.token
        value = os.environ.get(self.token_env) if self.token_env else None
        return value or None


class TaskConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    handler: str = Field(pattern=TARGET_PATTERN, description="`module:factory(deps, **options)`.")
    aliases: list[str] = Field(default_factory=list, description="Other `data_source` values it serves.")
    options: dict[str, Any] = Field(default_factory=dict)


class ServeConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    server: ServerConfig = Field(default_factory=ServerConfig)
    pipeline: PipelineConfig = Field(default_factory=PipelineConfig)
    executor: ExecutorConfig = Field(default_factory=ExecutorConfig)
    service: ServiceOptions = Field(default_factory=ServiceOptions)
    sandbox: SandboxSpec = Field(default_factory=SandboxSpec)
    llm: LLMConfig = Field(default_factory=LLMConfig)
    tasks: dict[str, TaskConfig] = Field(default_factory=dict)
    auth: AuthConfig = Field(default_factory=AuthConfig)
    journal: JournalConfig = Field(default_factory=JournalConfig)
    datasets: dict[str, Path] = Field(
        default_factory=dict,
        description="Server-side JSONL datasets DAPO batches may name (`POST /v1/batches` source.dataset); "
        "added to those from PRORL_DATASETS_DIR / PRORL_DATASETS.",
    )

    @field_validator("tasks", mode="before")
    @classmethod
    def _none_is_empty(cls, value: Any) -> Any:
        return {} if value is None else value

    @model_validator(mode="after")
    def _check(self) -> ServeConfig:
        if self.sandbox.backend == "apptainer" and not self.sandbox.image:
            raise ValueError(
                "sandbox=apptainer needs sandbox.image (a .sif file or sandbox directory), "
                "e.g. sandbox.image=/path/to/image.sif or PRORL_APPTAINER_IMAGE"
            )
        return self


def default_config_dir() -> Path:
    env = os.environ.get("PRORL_SERVICE_CONFIG_DIR")
    if env:
        return Path(env)
    return asset("configs", "service")


def format_validation_error(exc: ValidationError) -> str:
    lines = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err.get("loc", ())) or "(top level)"
        got = err.get("input")
        shown = "" if isinstance(got, dict | list) else f" (got {got!r})"
        lines.append(f"  {where}: {err.get('msg')}{shown}")
    return "invalid serve configuration:\n" + "\n".join(lines)


def validate_config(data: dict[str, Any]) -> ServeConfig:
    try:
        return ServeConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc)) from None


def compose_config(overrides: list[str] | None = None, config_dir: Path | None = None) -> dict[str, Any]:
    """Hydra compose (no working-directory change, no logging setup): plain dict out."""
    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    try:
        directory = (config_dir or default_config_dir()).resolve()
    except AssetError as exc:
        raise ConfigError(str(exc)) from None
    if not (directory / "serve.yaml").is_file():
        raise ConfigError(f"no serve.yaml in config directory {directory}")
    try:
        with initialize_config_dir(config_dir=str(directory), version_base=None, job_name="prorl_serve"):
            cfg = compose(config_name="serve", overrides=list(overrides or []))
        data = OmegaConf.to_container(cfg, resolve=True)
    except (HydraException, OmegaConfBaseException) as exc:
        raise ConfigError(f"cannot compose the serve configuration: {exc}") from None
    assert isinstance(data, dict)
    return {str(k): v for k, v in data.items()}


def load_config(overrides: list[str] | None = None, config_dir: Path | None = None) -> ServeConfig:
    return validate_config(compose_config(overrides, config_dir))
