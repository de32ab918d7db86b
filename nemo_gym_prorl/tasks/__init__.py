# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Task domains (math, STEM, code, SWE): workspace setup, tools offered, evaluators. See `base.py`
for the contract the pipeline and the agent use."""

from __future__ import annotations

import importlib
import typing
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from nemo_gym_prorl.tasks.base import (
    EvalOutcome,
    TaskDomain,
    final_text_from_messages,
    final_text_from_response,
)

DOMAIN_CLASSES = {
    "math": "nemo_gym_prorl.tasks.math:MathTask",
    "stem": "nemo_gym_prorl.tasks.stem:StemTask",
    "code": "nemo_gym_prorl.tasks.code:CodeTask",
    "swe": "nemo_gym_prorl.tasks.swe:SweTask",
    "command_output": "nemo_gym_prorl.tasks.command_output:CommandOutputTask",
}


def task_class(name: str) -> type[TaskDomain]:
    if name not in DOMAIN_CLASSES:
        raise ValueError(f"unknown task domain {name!r}; known: {', '.join(DOMAIN_CLASSES)}")
    module, _, cls = DOMAIN_CLASSES[name].partition(":")
    return getattr(importlib.import_module(module), cls)


def make_task(name: str, **kwargs: Any) -> TaskDomain:
    """A domain by name (`math`, `stem`, `code`, `swe`, `command_output`); kwargs go to its
    constructor (config=...)."""
    return task_class(name)(**kwargs)


def make_task_from_options(name: str, config: Mapping[str, Any] | None = None) -> TaskDomain:
    """A domain from plain (YAML) options: `config` is validated into the domain's own config
    model, the one its constructor's `config` parameter names."""
    cls = task_class(name)
    if not config:
        return cls()
    hint = typing.get_type_hints(cls.__init__).get("config")
    models = [t for t in typing.get_args(hint) or (hint,) if isinstance(t, type) and issubclass(t, BaseModel)]
    if not models:
        raise ValueError(f"task domain {name!r} takes no configuration")
    return cls(config=models[0].model_validate(dict(config)))


__all__ = ["DOMAIN_CLASSES", "EvalOutcome", "TaskDomain", "final_text_from_messages", "final_text_from_response",
           "make_task", "make_task_from_options", "task_class"]  # fmt: skip
