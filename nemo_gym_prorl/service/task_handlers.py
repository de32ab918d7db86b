# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The task handlers `prorl serve` registers, built from the `tasks` section of its config: one
handler per task, named in `TASK_HANDLERS` or as `module:factory`, called with the shared
dependencies. Used by the service's builder
and by every Ray node, which builds its own handlers from the same config."""

from __future__ import annotations

from collections.abc import Callable

from nemo_gym_prorl.agent.deps import HandlerDeps
from nemo_gym_prorl.llm.access import LLMAccess
from nemo_gym_prorl.pipeline import HandlerRegistry, RolloutHandler
from nemo_gym_prorl.registry import Registry, RegistryError
from nemo_gym_prorl.service.backends import BackendRegistry
from nemo_gym_prorl.service.config import ConfigError, ServeConfig

HandlersFactory = Callable[[LLMAccess, BackendRegistry], HandlerRegistry]
"""Registers a service's task handlers over the LLM access (and backend registry) given."""


TASK_HANDLERS: Registry[RolloutHandler] = Registry("task handler")
"""Task handlers by name; a config names one by its registered name or as `module:factory`.
A factory is called with the shared `HandlerDeps` and the task's `options`."""


def build_handlers(config: ServeConfig, llm: LLMAccess, backends: BackendRegistry) -> HandlerRegistry:
    deps = HandlerDeps(sandbox=config.sandbox, llm=llm, backends=backends, config=config)
    registry = HandlerRegistry()
    problems: list[str] = []
    for name, task in config.tasks.items():
        try:
            handler = TASK_HANDLERS.create(task.handler, deps, **task.options)
            # A handler may know the data_source values it serves (a domain's `data_sources`).
            own = getattr(handler, "aliases", ())
            aliases = [a for a in dict.fromkeys([*task.aliases, *own]) if a != name]
            registry.register(name, handler, aliases)
        except RegistryError as exc:
            problems.append(f"tasks.{name}.handler: {exc}")
        except (TypeError, ValueError) as exc:
            problems.append(f"tasks.{name}: {exc}")
    if problems:
        raise ConfigError(
            "task handlers could not be built:\n  "
            + "\n  ".join(problems)
            + "\n(choose other tasks with `tasks=...`, or set `tasks.<name>.handler=module:factory`)"
        )
    return registry
