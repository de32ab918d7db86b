# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""One registry pattern for every pluggable part: a name -> factory table.

Dialects, tool-call parsers, sandbox backends, executors and task handlers each keep one
`Registry`. The built-ins register themselves by name where they are defined; a user extends a
registry without touching the package, either in code (`REGISTRY.register("mine", factory)`) or
from configuration, by giving an import target `package.module:factory` wherever a name is
accepted. Either way the factory is looked up here, so every registry resolves, validates and
reports unknown names the same way.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from typing import Any, TypeVar, overload

F = TypeVar("F", bound=Callable[..., Any])


class RegistryError(ValueError):
    """An unknown name, an import target that does not import, or a duplicate registration."""


def import_target(target: str, what: str = "import target") -> Callable[..., Any]:
    """The callable named by `package.module:attribute`."""
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise RegistryError(f"{what}: {target!r} is not of the form package.module:factory")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise RegistryError(f"{what}: cannot import module {module_name!r} ({exc})") from None
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise RegistryError(f"{what}: {target!r} is not a callable in {module_name}")
    return factory


def is_import_target(name: str) -> bool:
    return ":" in name


class Registry[T]:
    """Factories of `T` by name; `kind` names the registry in every error ("dialect", ...)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._factories: dict[str, Callable[..., T]] = {}

    @overload
    def register(self, name: str) -> Callable[[F], F]: ...
    @overload
    def register(self, name: str, factory: F) -> F: ...
    def register(self, name: str, factory: Any = None) -> Any:
        """Register `factory` under `name`; without `factory`, a decorator that does."""
        if is_import_target(name) or not name:
            raise RegistryError(f"{self.kind} name {name!r} must be a plain, non-empty name")

        def add(fn: F) -> F:
            if name in self._factories and self._factories[name] is not fn:
                raise RegistryError(f"{self.kind} {name!r} is already registered")
            self._factories[name] = fn
            return fn

        return add(factory) if factory is not None else add

    def factory(self, name: str) -> Callable[..., T]:
        """The factory registered as `name`, or imported from `name` if it is `module:factory`."""
        if is_import_target(name):
            return import_target(name, self.kind)
        try:
            return self._factories[name]
        except KeyError:
            raise RegistryError(
                f"unknown {self.kind} {name!r}; choose one of {self.names()} "
                "or give an import target package.module:factory"
            ) from None

    def check(self, name: str) -> str:
        """`name` itself if it names a factory (registered, or an import target that imports);
        a pydantic `AfterValidator`, so a config field fails validation naming the known names."""
        self.factory(name)
        return name

    def create(self, name: str, /, *args: Any, **kwargs: Any) -> T:
        return self.factory(name)(*args, **kwargs)

    def names(self) -> list[str]:
        return sorted(self._factories)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and (name in self._factories or is_import_target(name))

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())
