# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""A Ray cluster of simulated nodes on this machine, for the scale-out benchmark and tests.

Each node is a real raylet (with its agents) started by `ray.cluster_utils.Cluster`, declaring
its own `num_cpus`, so placement, node affinity and node death behave as on a real cluster;
only the machine is shared.

On a busy machine a node's agents can take longer to start than the raylet waits for them (15 s
per port file, fixed in the raylet; 30 s in `ray._private.node`). So while a node starts
(`quick_node_start`): its dashboard agent runs in Ray's minimal mode (nothing here uses the
dashboard or Ray's metrics), and the ports a minimal agent reports (none: -1) are written for it
as soon as the node's session directory exists, and the runtime-env agent's port is chosen up
front, so the raylet need not wait for its agents' Python start-up; the start runs at a raised CPU priority where allowed (its processes return to
normal priority once up); the Python-side window is widened; a failed start is retried and its
processes are ended by pid.

Every node is started, and this process connects, in Ray's local-only mode
(`nemo_gym_prorl.pipeline.ray_start.loopback_only`): each process of the cluster listens on
127.0.0.1 only.
"""

from __future__ import annotations

import contextlib
import glob
import os
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import psutil

from nemo_gym_prorl.pipeline.ray_start import loopback_only

# Notice a killed raylet within a few seconds instead of Ray's default ~15-30 s.
FAST_FAILURE_DETECTION = {"health_check_period_ms": 1000, "health_check_failure_threshold": 5}
# Ray starts workers at nice 15 so they yield to a node's own services; a simulated node shares
# one machine with others, where that would measure the neighbours' load, not the node's.
SIMULATED_NODE_CONFIG = {"worker_niceness": 0}


@contextlib.contextmanager
def children_write_to_stderr() -> Iterator[None]:
    """Ray's node processes inherit stdout; keep it for the caller's report."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)


START_WINDOW_S = 180
START_NICE = -10


def _announce_minimal_agent(
    node_id: str, session_dir: Callable[[], str | None], stop: threading.Event
) -> None:
    """Write what a minimal dashboard agent reports (no metrics or listen port: -1), atomically,
    in the files the raylet waits for; the agent writes the same values when it is up."""
    from ray._raylet import (
        DASHBOARD_AGENT_LISTEN_PORT_NAME,
        METRICS_AGENT_PORT_NAME,
        METRICS_EXPORT_PORT_NAME,
    )

    while not stop.wait(0.05):
        directory = session_dir()
        if directory is None or not os.path.isdir(directory):
            continue
        for name in (METRICS_AGENT_PORT_NAME, METRICS_EXPORT_PORT_NAME, DASHBOARD_AGENT_LISTEN_PORT_NAME):
            path = os.path.join(directory, f"{name}_{node_id}")
            if not os.path.exists(path):
                tmp = f"{path}.{os.getpid()}.tmp"
                with open(tmp, "w") as fh:
                    fh.write("-1")
                os.replace(tmp, path)
        return


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _own_sessions() -> set[str]:
    return set(glob.glob(f"/tmp/ray/session_*_{os.getpid()}"))


def _new_session(existing: set[str]) -> Callable[[], str | None]:
    """The session directory a head node being started creates (ours: it ends in our pid)."""

    def find() -> str | None:
        fresh = _own_sessions() - existing
        return max(fresh) if fresh else None

    return find


@contextlib.contextmanager
def quick_node_start(
    node_id: str, session_dir: Callable[[], str | None], window_s: float = START_WINDOW_S
) -> Iterator[None]:
    """See the module docstring. Ray's Python side polls `services.get_node` and gives up after
    30 s; retrying inside that call widens the window."""
    from ray._private import services, utils

    original = services.get_node
    original_deps = utils.get_dashboard_dependency_error
    nice = os.getpriority(os.PRIO_PROCESS, 0)
    before = _descendants()

    def get_node(*args: Any, **kwargs: Any) -> Any:
        deadline = time.monotonic() + window_s
        while True:
            try:
                return original(*args, **kwargs)
            except RuntimeError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    services.get_node = get_node
    utils.get_dashboard_dependency_error = lambda: "minimal agent: the dashboard is not used"
    stop = threading.Event()
    announcer = threading.Thread(
        target=_announce_minimal_agent, args=(node_id, session_dir, stop), daemon=True
    )
    announcer.start()
    with contextlib.suppress(PermissionError, OSError):
        os.setpriority(os.PRIO_PROCESS, 0, START_NICE)
    try:
        yield
    finally:
        stop.set()
        announcer.join()
        services.get_node = original
        utils.get_dashboard_dependency_error = original_deps
        with contextlib.suppress(PermissionError, OSError):
            os.setpriority(os.PRIO_PROCESS, 0, nice)
        for pid in _descendants() - before:  # the new node's processes: back to normal
            with contextlib.suppress(psutil.Error):
                psutil.Process(pid).nice(nice)


def _descendants() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True)}


def _own_session_processes() -> set[int]:
    """Processes of Ray sessions this process started (their session directory ends in our
    pid), including agents orphaned when a raylet failed to start."""
    mark = f"_{os.getpid()}/"
    found = set()
    for proc in psutil.process_iter(["pid", "cmdline"]):
        with contextlib.suppress(psutil.Error, TypeError):
            if any("/session_" in part and mark in part for part in proc.info["cmdline"] or ()):
                found.add(proc.info["pid"])
    return found


def _end(pids: set[int]) -> None:
    procs = []
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            proc = psutil.Process(pid)
            proc.kill()
            procs.append(proc)
    psutil.wait_procs(procs, timeout=10)


def _retrying(cluster: Any, node_args: dict[str, Any], attempts: int) -> Any:
    from ray import NodeID

    for attempt in range(1, attempts + 1):
        before = _descendants() | _own_session_processes()
        node_id = NodeID.from_random().hex()
        head = cluster.head_node
        session = head.get_session_dir_path if head is not None else _new_session(_own_sessions())
        try:
            with children_write_to_stderr(), loopback_only(), quick_node_start(node_id, session):
                # Ray's own hook for choosing a node's id, so its agent's files can be written.
                env = {**node_args.get("env_vars", {}), "RAY_OVERRIDE_NODE_ID_FOR_TESTING": node_id}
                # A port given up front is one the raylet need not wait for the agent to report.
                port = node_args.get("runtime_env_agent_port") or _free_port()
                return cluster.add_node(**{**node_args, "env_vars": env, "runtime_env_agent_port": port})
        except Exception:
            # What the failed start left behind, by pid.
            _end((_descendants() | _own_session_processes()) - before)
            if attempt == attempts:
                raise
            time.sleep(2.0)
    raise AssertionError("unreachable")


def start_local_cluster(
    head: dict[str, Any] | None = None, *, attempts: int = 3, fast_failure_detection: bool = True
) -> Any:
    """A head node (plus `ray.init` connected to it); add workers with `add_local_node`."""
    from ray.cluster_utils import Cluster

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # no token file written under ~/.ray
    args: dict[str, Any] = {"num_cpus": 1, "include_dashboard": False, **(head or {})}
    config = dict(SIMULATED_NODE_CONFIG)
    if fast_failure_detection:
        config.update(FAST_FAILURE_DETECTION)
    args["_system_config"] = {**config, **args.get("_system_config", {})}
    cluster = Cluster(initialize_head=False)
    _retrying(cluster, args, attempts)
    return cluster


def add_local_node(cluster: Any, *, attempts: int = 3, **node_args: Any) -> Any:
    node_args.setdefault("num_cpus", 1)
    return _retrying(cluster, node_args, attempts)


def connect(cluster: Any) -> None:
    import ray

    cluster.wait_for_nodes()
    with children_write_to_stderr(), loopback_only():
        ray.init(address=cluster.address, include_dashboard=False, log_to_driver=False)


def node_pids(cluster: Any) -> set[int]:
    """The processes the cluster's nodes started themselves (GCS, raylets, agents); workers are
    their descendants."""
    return {
        info.process.pid
        for node in cluster.list_all_nodes()
        for infos in node.all_processes.values()
        for info in infos
        if info.process is not None
    }


def shutdown_local_cluster(cluster: Any, within_s: float = 60.0) -> list[int]:
    """Disconnect, stop every node, and return the pids of its processes still alive after
    `within_s` (empty when everything ended; on 2 cores shared with other test workers, Ray's
    processes took more than 30 s to go)."""
    import ray

    pids = node_pids(cluster)
    before = _descendants()
    with children_write_to_stderr():
        ray.shutdown()
        cluster.shutdown()
    pids |= {p for p in before if _is_ray(p)} | _own_session_processes()  # workers and agents
    deadline = time.monotonic() + within_s
    while True:
        alive = [p for p in pids if _running(p)]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.25)


def _is_ray(pid: int) -> bool:
    with contextlib.suppress(psutil.Error):
        proc = psutil.Process(pid)
        return "ray" in proc.name().lower() or any("ray" in part for part in proc.cmdline()[:3])
    return False


def _running(pid: int) -> bool:
    with contextlib.suppress(psutil.Error):
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    return False
