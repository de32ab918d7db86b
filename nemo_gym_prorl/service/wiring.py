"""From a validated `ServeConfig` to a running service: handlers, backends, pipeline, app.

Task handlers and the backend registry are named by import targets (`module:factory`), so the
real task modules and the LLM pool plug in through configuration, not code changes here.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI

from nemo_gym_prorl.pipeline import HandlerRegistry, Pipeline
from nemo_gym_prorl.sandbox import SandboxSpec
from nemo_gym_prorl.service.app import create_app
from nemo_gym_prorl.service.backends import BackendRegistry, UrlBackendRegistry
from nemo_gym_prorl.service.config import ConfigError, ServeConfig
from nemo_gym_prorl.service.core import RolloutService

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class HandlerDeps:
    """What a task handler factory gets: `factory(deps, **options) -> RolloutHandler`."""

    sandbox: SandboxSpec
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


def build_backends(config: ServeConfig) -> BackendRegistry:
    cfg = config.backends
    if cfg.registry is None:
        return UrlBackendRegistry(health_path=cfg.health_path)
    registry = import_target(cfg.registry, "backends.registry")(cfg)
    if not isinstance(registry, BackendRegistry):
        raise ConfigError(f"backends.registry {cfg.registry!r} did not return a BackendRegistry")
    return registry


def build_handlers(config: ServeConfig, backends: BackendRegistry) -> HandlerRegistry:
    deps = HandlerDeps(sandbox=config.sandbox, backends=backends, config=config)
    registry = HandlerRegistry()
    problems: list[str] = []
    for name, task in config.tasks.items():
        try:
            handler = import_target(task.handler, f"tasks.{name}.handler")(deps, **task.options)
            registry.register(name, handler, task.aliases)
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
    backends = build_backends(config)
    for url in config.backends.urls:
        await backends.add(url)
    pipeline = Pipeline(build_handlers(config, backends), config.pipeline)
    return RolloutService(pipeline, backends, config.service)


async def _probe_forever(backends: BackendRegistry, interval: float) -> None:
    probe = getattr(backends, "probe", None)
    if probe is None:
        return
    while True:
        with contextlib.suppress(Exception):
            await probe()
        await asyncio.sleep(interval)


def build_app(config: ServeConfig, service: RolloutService) -> FastAPI:
    app = create_app(service, token=config.auth.resolved_token())
    interval = config.backends.probe_interval_s
    if interval is not None and config.backends.health_path is not None:
        inner = app.router.lifespan_context

        @contextlib.asynccontextmanager
        async def lifespan(a: FastAPI) -> AsyncIterator[None]:
            async with inner(a):
                task = asyncio.create_task(_probe_forever(service.backends, interval))
                try:
                    yield
                finally:
                    task.cancel()

        app.router.lifespan_context = lifespan
    return app
