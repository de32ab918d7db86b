# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""A real local Ray cluster of two raylets on this machine for a test module, and what its
processes listen on (tests only)."""

from __future__ import annotations

import contextlib
import ipaddress
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import psutil

from ray_local import (
    add_local_node,
    connect,
    shutdown_local_cluster,
    start_local_cluster,
)


@contextlib.contextmanager
def two_node_cluster() -> Iterator[Any]:
    """The head and one worker, one CPU each, this process connected; a test may add and kill
    more nodes. On exit, fails if any Ray process outlived the cluster."""
    # The nodes' workers import test-support handlers from tests/, as this process does.
    tests_dir = str(Path(__file__).resolve().parents[1])
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [tests_dir, os.environ.get("PYTHONPATH")]))
    cluster = start_local_cluster()
    try:
        add_local_node(cluster)
        connect(cluster)
        yield cluster
    finally:
        assert shutdown_local_cluster(cluster) == [], "Ray processes outlived the cluster"


def listeners(root_pids: Iterable[int]) -> dict[str, list[str]]:
    """Every listening TCP socket of the given processes and all their descendants, as
    {"pid name": ["ip:port", ...]}."""
    procs: dict[int, psutil.Process] = {}
    for pid in root_pids:
        with contextlib.suppress(psutil.Error):
            root = psutil.Process(pid)
            for proc in [root, *root.children(recursive=True)]:
                procs[proc.pid] = proc
    found: dict[str, list[str]] = {}
    for proc in procs.values():
        with contextlib.suppress(psutil.Error):
            sockets = proc.net_connections(kind="inet")
            name = f"{proc.pid} {proc.name()}"
            listening = sorted(
                f"{s.laddr.ip}:{s.laddr.port}" for s in sockets if s.status == psutil.CONN_LISTEN
            )
            if listening:
                found[name] = listening
    return found


def is_loopback(ip: str) -> bool:
    """127.0.0.0/8, ::1, or IPv4 loopback as an IPv6-mapped address (::ffff:127.0.0.1)."""
    address = ipaddress.ip_address(ip.split("%")[0])
    mapped = getattr(address, "ipv4_mapped", None)
    return (mapped or address).is_loopback


def exposed(root_pids: Iterable[int]) -> dict[str, list[str]]:
    """The listening sockets of those processes that anyone beyond this machine could reach."""
    out = {}
    for proc, sockets in listeners(root_pids).items():
        beyond = [s for s in sockets if not is_loopback(s.rsplit(":", 1)[0])]
        if beyond:
            out[proc] = beyond
    return out
