# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Reaching Ray: join the configured cluster, or start a local one that only this machine can
reach, and read which of its nodes may host rollout actors.

A local Ray (no address, or `local`) is started as local: `ray.init()` with no address would
join whatever cluster `/tmp/ray/ray_current_cluster` names, and a stale file left by a dead run
makes it retry that dead GCS for minutes.

A Ray node's servers (GCS, raylet, workers, agents) listen on the node's IP address. Ray turns a
requested `127.0.0.1` into the machine's network address unless it runs in its local-only mode
(the one it uses on macOS and Windows), so a local start switches that mode on while the node
starts: every process then listens on loopback. Ray's processes inherit the mode from the
environment; this process reads it from `ray_constants`, which is why both are set.

Joining a cluster changes nothing here: a cluster's nodes must reach each other, so on a
cluster Ray's token authentication (`RAY_AUTH_MODE=token` with a token per cluster) is what
keeps strangers out; see `examples/slurm/prorl_ray.sub`.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from typing import Any

LOCAL = "local"
LOCAL_ONLY_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
"""Ray's switch for its local-only mode: `0` makes a new node's address 127.0.0.1."""


def resolve_address(configured: str | None, gym_head_address: str | None = None) -> str | None:
    """The cluster to join: configured, then RAY_ADDRESS, then NeMo Gym's head address; None
    (or `local`) means a local Ray started by this process."""
    return configured or os.environ.get("RAY_ADDRESS") or gym_head_address or None


def is_local(address: str | None) -> bool:
    return address is None or address == LOCAL


def local_ray_env(environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """Environment for a child process that starts Ray itself (NeMo Gym's `ray.init()`): a local
    cluster of its own, on loopback only, unless RAY_ADDRESS names a cluster to join."""
    address = environ.get("RAY_ADDRESS") or LOCAL
    env = {"RAY_ADDRESS": address}
    if is_local(address):
        env[LOCAL_ONLY_ENV] = "0"
    return env


@contextlib.contextmanager
def loopback_only() -> Iterator[None]:
    """While a Ray node starts in this process, its address (and so every listening socket of
    its processes) is 127.0.0.1. Restored afterwards, so a later join is unaffected."""
    from ray._private import ray_constants

    saved_env = os.environ.get(LOCAL_ONLY_ENV)
    saved_flag = ray_constants.ENABLE_RAY_CLUSTER
    os.environ[LOCAL_ONLY_ENV] = "0"
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = saved_flag
        if saved_env is None:
            os.environ.pop(LOCAL_ONLY_ENV, None)
        else:
            os.environ[LOCAL_ONLY_ENV] = saved_env


def init_ray(address: str | None, **kwargs: Any) -> None:
    """`ray.init`: join `address`, or with none (or `local`) start a local Ray that listens on
    loopback only and never joins a cluster an earlier run left behind."""
    import ray

    if not is_local(address):
        ray.init(address=address, **kwargs)
        return
    with loopback_only():
        ray.init(address=LOCAL, **kwargs)


def node_lost_errors() -> tuple[type[BaseException], ...]:
    """Ray's errors that mean an actor's node (or the actor) is gone for good."""
    from ray import exceptions as rex

    kinds: list[type[BaseException]] = [rex.RayActorError, rex.WorkerCrashedError, rex.ObjectLostError]
    for name in ("NodeDiedError", "OwnerDiedError", "ActorUnavailableError"):
        kind = getattr(rex, name, None)
        if isinstance(kind, type):
            kinds.append(kind)
    return tuple(kinds)


def eligible_nodes(labels: Mapping[str, str], resource: str | None) -> list[dict[str, Any]]:
    """Live nodes that carry all `labels` and offer `resource` (any CPU when None)."""
    import ray

    out = []
    for node in ray.nodes():
        if not node.get("Alive"):
            continue
        if node.get("Resources", {}).get(resource or "CPU", 0) <= 0:
            continue
        have = node.get("Labels") or {}
        if any(have.get(k) != v for k, v in labels.items()):
            continue
        out.append(node)
    return out
