# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Load a NeMo RL recipe as NeMo RL's `load_config` does (`nemo_rl/utils/config.py`, 7ea279a).

`defaults:` names parent files (a string or a list, relative to the file's directory), merged in
order under the child; a top-level child section marked `_override_: true` replaces the parent's
instead of merging into it; NeMo RL's resolvers `add`, `mul`, `div`, `max` serve interpolations.
"""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf

RESOLVERS = {
    "add": lambda a, b: a + b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "max": lambda a, b: max(a, b),
}
MAX_DEPTH = 16


def register_resolvers() -> None:
    for name, fn in RESOLVERS.items():
        if not OmegaConf.has_resolver(name):
            OmegaConf.register_new_resolver(name, fn)


def _merge_with_override(base: DictConfig | None, override: DictConfig) -> DictConfig:
    """`OmegaConf.merge(base, override)`, except that an override section marked `_override_: true`
    replaces the base's; no base is an empty one. Neither argument changes: both may be cached
    files."""
    replaced = [
        key
        for key in override
        if not OmegaConf.is_missing(override, key)
        and isinstance(override[key], DictConfig)
        and override[key].get("_override_", False)
    ]
    if base is None and not replaced:
        return override  # merging into nothing copies it, and nobody changes it
    base = OmegaConf.create({}) if base is None else base
    if replaced:
        base, override = copy.deepcopy(base), copy.deepcopy(override)
        for key in replaced:
            override[key].pop("_override_")
            if key in base:
                base.pop(key)
    merged = OmegaConf.merge(base, override)
    assert isinstance(merged, DictConfig)
    return merged


def _load(path: Path, depth: int) -> DictConfig:
    stat = path.stat()
    return _load_file(path.resolve(), stat.st_mtime_ns, stat.st_size, depth)


# Recipes share their parents (most of NeMo RL's examples start from the same few files): each
# file is parsed and merged once while it is unchanged, not once per recipe naming it.
@functools.lru_cache(maxsize=256)
def _load_file(path: Path, _mtime_ns: int, _size: int, depth: int) -> DictConfig:
    if depth > MAX_DEPTH:
        raise ValueError(f"{path}: `defaults` nests deeper than {MAX_DEPTH} files")
    config = OmegaConf.load(path)
    if not isinstance(config, DictConfig):
        raise ValueError(f"{path}: a recipe must be a mapping")
    if "defaults" not in config:
        return config
    parents = config.pop("defaults")
    if isinstance(parents, str):
        names = [parents]
    elif isinstance(parents, ListConfig):
        names = [str(p) for p in parents]
    else:
        raise ValueError(f"{path}: `defaults` must be a file name or a list of them")
    base: DictConfig | None = None
    for name in names:
        parent = Path(name) if name.startswith("/") else path.parent / name
        base = _merge_with_override(base, _load(parent, depth + 1))
    return _merge_with_override(base, config)


def load_recipe(path: Path | str) -> dict[str, Any]:
    """The recipe as the plain dict NeMo RL hands to `MasterConfig(**config)`."""
    register_resolvers()
    container = OmegaConf.to_container(_load(Path(path), 0), resolve=True)
    if not isinstance(container, dict):
        raise ValueError(f"{path}: a recipe must be a mapping")
    # A YAML mapping's keys may be ints or bools to OmegaConf; NeMo RL's config keys are names.
    return {str(key): value for key, value in container.items()}
