# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""NeMo RL's config schema, rebuilt as pydantic types from the recorded data (`record.json`).

NeMo RL's runners build `MasterConfig(**config)` (pydantic) and its own config test validates
each example with `TypeAdapter(MasterConfig)`. The record holds the same classes as data (see
`derive.py`); here they become pydantic TypedDicts and models again, so validating a recipe
raises the errors NeMo RL would raise, field path included, without NeMo RL installed.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import GenericAlias
from typing import Annotated, Any, Literal, NotRequired, Union

from pydantic import ConfigDict, Field, TypeAdapter, ValidationError, create_model
from typing_extensions import TypedDict

RECORD_PATH = Path(__file__).with_name("record.json")

# The types below are built from data at run time. `Union[...]` is subscripted as the call it is;
# TypedDict's functional form is special-cased by type checkers (mypy insists on literal arguments
# and refuses to treat it as a callable), so its one use carries an ignore.
_typed_dict: Callable[..., Any] = TypedDict  # type: ignore[assignment]
_union: Callable[[tuple[Any, ...]], Any] = Union.__getitem__
RUNNERS = ("grpo", "single_controller")


@cache
def load_record(path: Path = RECORD_PATH) -> dict[str, Any]:
    return json.loads(Path(path).read_text())


@dataclass(frozen=True)
class Problem:
    """One reason NeMo RL would refuse a recipe: where, and what."""

    path: str
    message: str
    source: str = "schema"

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


class _Builder:
    def __init__(self, record: dict[str, Any]) -> None:
        self.classes: dict[str, dict[str, Any]] = record["classes"]
        self.built: dict[str, Any] = {}

    def cls(self, qname: str) -> Any:
        if qname in self.built:
            return self.built[qname]
        spec = self.classes[qname]
        short = qname.rpartition(".")[2]
        if spec["kind"] == "typeddict":
            keys: dict[str, Any] = {
                name: (self.type(f["type"]) if f["required"] else NotRequired[self.type(f["type"])])
                for name, f in spec["fields"].items()
            }
            built: Any = _typed_dict(short, keys, total=spec["total"])
        else:
            # pydantic keeps underscore names as private attributes, never validated: so does NeMo RL.
            fields: dict[str, Any] = {
                name: (self.type(f["type"]), ... if f["required"] else None)
                for name, f in spec["fields"].items()
                if not name.startswith("_")
            }
            built = create_model(short, __config__=ConfigDict(extra=spec["extra"]), **fields)
        self.built[qname] = built
        return built

    def type(self, t: dict[str, Any]) -> Any:
        kind = t["k"]
        if kind == "any":
            return Any
        if kind == "none":
            return type(None)
        if kind in ("int", "float", "str", "bool"):
            base = {"int": int, "float": float, "str": str, "bool": bool}[kind]
            limits = {k: t[k] for k in ("gt", "ge", "lt", "le") if k in t}
            return Annotated[base, Field(**limits)] if limits else base
        if kind == "lit":
            return Literal[tuple(t["v"])]
        if kind == "list":
            return GenericAlias(list, (self.type(t["of"]),))
        if kind == "dict":
            return GenericAlias(dict, (self.type(t["key"]), self.type(t["val"])))
        if kind == "ref":
            return self.cls(t["name"])
        if kind == "union":
            members = tuple(self.type(m) for m in t["of"])
            union = _union(members)
            return Annotated[union, Field(discriminator=t["disc"])] if "disc" in t else union
        raise ValueError(f"unknown type node {t!r} in the NeMo RL record")


def _adapter(record: dict[str, Any], runner: str) -> TypeAdapter[Any]:
    if runner not in record["roots"]:
        raise ValueError(f"unknown NeMo RL runner {runner!r}; known: {sorted(record['roots'])}")
    return TypeAdapter(_Builder(record).cls(record["roots"][runner]))


@cache
def master_config(runner: str) -> TypeAdapter[Any]:
    """A validator for the runner's `MasterConfig`, rebuilt from the recorded schema."""
    return _adapter(load_record(), runner)


def validate(config: dict[str, Any], runner: str, schema: dict[str, Any] | None = None) -> list[Problem]:
    """The errors NeMo RL's `MasterConfig(**config)` raises for this recipe (empty: accepted).

    `schema`: one derived from another NeMo RL checkout (`derive.derive_schema`); default: the record.
    """
    adapter = master_config(runner) if schema is None else _adapter(schema, runner)
    try:
        adapter.validate_python(config)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            path = ".".join(str(part) for part in error["loc"]) or "root"
            got = "" if error["type"] == "missing" else f" (got: {str(error.get('input'))[:100]})"
            problems.append(Problem(path, f"{error['msg']} (type={error['type']}){got}"))
        return problems
    return []
