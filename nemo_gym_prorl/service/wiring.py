"""From a validated `ServeConfig` to a running service: handlers, backends, pipeline, app.

Task handlers are named by import targets (`module:factory`), so task kinds plug in through
configuration, not code changes here; they all share the service's one LLM backend pool.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI

from nemo_gym_prorl.agent.handler import LLMAccess
from nemo_gym_prorl.llm import LLMBackendPool, make_dialect
from nemo_gym_prorl.pipeline import HandlerRegistry, Pipeline
from nemo_gym_prorl.sandbox import SandboxSpec
from nemo_gym_prorl.service.app import create_app
from nemo_gym_prorl.service.backends import BackendRegistry, PoolBackendRegistry
from nemo_gym_prorl.service.batch_manager import DatasetCatalog
from nemo_gym_prorl.service.config import ConfigError, ServeConfig
from nemo_gym_prorl.service.core import RolloutService

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class HandlerDeps:
    """What a task handler factory gets: `factory(deps, **options) -> RolloutHandler`."""

    sandbox: SandboxSpec
    llm: LLMAccess
    backends: BackendRegistry
    config: ServeConfig


def import_target(target: str, what: str) -> Callable[..., Any]:
    module_name, _, attr = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"{what}: cannot import module {module_name!r} ({exc})") from None
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise ConfigError(f"{what}: {target!r} is not a callable in {module_name}")
    return factory


async def build_llm(config: ServeConfig) -> tuple[LLMAccess, PoolBackendRegistry]:
    """The one LLM pool of the service: rollouts are balanced over it, the API manages it."""
    settings = config.llm
    pool = LLMBackendPool(settings)
    await pool.start()  # probes the configured backends; starts the periodic health check
    llm = LLMAccess(
        pool=pool,
        dialect=make_dialect(settings.dialect),
        model=settings.model,
        default_sampling=settings.sampling,
        max_model_len=settings.max_model_len,
        tool_prompt=settings.tool_prompt,
    )
    return llm, PoolBackendRegistry(pool)


def build_handlers(config: ServeConfig, llm: LLMAccess, backends: BackendRegistry) -> HandlerRegistry:
    deps = HandlerDeps(sandbox=config.sandbox, llm=llm, backends=backends, config=config)
    registry = HandlerRegistry()
    problems: list[str] = []
    for name, task in config.tasks.items():
        try:
            handler = import_target(task.handler, f"tasks.{name}.handler")(deps, **task.options)
            # A handler may know the data_source values it serves (a domain's `data_sources`).
            own = getattr(handler, "aliases", ())
            aliases = [a for a in dict.fromkeys([*task.aliases, *own]) if a != name]
            registry.register(name, handler, aliases)
        except ConfigError as exc:
            problems.append(str(exc))
        except (TypeError, ValueError) as exc:
            problems.append(f"tasks.{name}: {exc}")
    if problems:
        raise ConfigError(
            "task handlers could not be built:\n  "
            + "\n  ".join(problems)
            + "\n(choose other tasks with `tasks=...`, or set `tasks.<name>.handler=module:factory`)"
        )
    return registry


async def build_service(config: ServeConfig) -> RolloutService:
    llm, backends = await build_llm(config)
    try:
        pipeline = Pipeline(build_handlers(config, llm, backends), config.pipeline)
    except BaseException:
        await backends.aclose()
        raise
    return RolloutService(pipeline, backends, config.service)


def build_app(config: ServeConfig, service: RolloutService) -> FastAPI:
    datasets = DatasetCatalog({**DatasetCatalog.from_env().paths(), **config.datasets})
    return create_app(service, token=config.auth.resolved_token(), datasets=datasets)
