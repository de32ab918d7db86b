# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""NeMo RL's runner rules (the checks its entry points make after `MasterConfig`), as data.

Each rule in `record.json` names the runners it applies to, an operation over dotted config
paths, the message, and anchors: text in NeMo RL's source at the recorded commit that the rule
restates (`derive.py` fails when an anchor disappears, so a moved rule is noticed).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nemo_gym_prorl.integrations.nemo_rl.schema import Problem, load_record

_MISSING = object()


def lookup(config: Mapping[str, Any], path: str, default: Any = _MISSING) -> Any:
    node: Any = config
    for part in path.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return default
        node = node[part]
    return node


def _holds(rule: Mapping[str, Any], config: Mapping[str, Any]) -> bool:
    op, path = rule["op"], rule["path"]
    value = lookup(config, path, rule.get("default", _MISSING))
    if op == "present":
        return value is not _MISSING and value is not None
    if op == "null":
        return value is None
    if op == "equals":
        return value is not _MISSING and value == rule["value"]
    if op == "not_both":
        return not (
            value not in (_MISSING, None) and bool(value) and bool(lookup(config, rule["other"], False))
        )
    if op == "ge":
        other = lookup(config, rule["other"], rule.get("other_default", _MISSING))
        return isinstance(value, int | float) and isinstance(other, int | float) and value >= other
    if op == "product_equals":
        factors = [lookup(config, p, None) for p in rule["paths"]]
        if not all(isinstance(f, int) for f in factors) or not isinstance(value, int):
            return False
        product = 1
        for f in factors:
            product *= f
        return product == value
    if op == "prefix_or_null":
        if not lookup(config, rule["when"], False):
            return True
        return value in (_MISSING, None) or (isinstance(value, str) and value.startswith(rule["prefix"]))
    raise ValueError(f"unknown runner-rule op {op!r} in the NeMo RL record")


def check_runner_rules(config: Mapping[str, Any], runner: str) -> list[Problem]:
    record = load_record()
    entry = record["runner_entry_points"][runner]
    return [
        Problem(rule["path"], rule["message"], source=f"runner rule {rule['id']} ({entry})")
        for rule in record["runner_rules"]
        if runner in rule["runners"] and not _holds(rule, config)
    ]
