# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The service's executor section: validated, worker processes for `prorl serve` and in-process
for an embedded stack by default, Ray nodes get their share."""

from __future__ import annotations

import pytest
from support.scripted_stages import SCRIPTED_TASKS

from nemo_gym_prorl.llm.balancer import BalancerConfig
from nemo_gym_prorl.llm.pool import LLMBackendPool, PoolConfig
from nemo_gym_prorl.pipeline.executor import InProcessExecutor
from nemo_gym_prorl.pipeline.executors import EXECUTORS, make_executor
from nemo_gym_prorl.pipeline.ray_executor import NodeShare, resolve_address
from nemo_gym_prorl.service.backends import PoolBackendRegistry
from nemo_gym_prorl.service.cluster import (
    SharedBackends,
    node_llm_config,
    with_cluster_backends,
)
from nemo_gym_prorl.service.config import ConfigError, load_config, validate_config


def test_prorl_serve_runs_rollouts_in_worker_processes_by_default() -> None:
    # A service runs at the load its users run (a thousand rollouts): there one event loop cannot
    # keep up with them all (docs/scaling.md), so `prorl serve` starts its workers unless told not to.
    config = load_config(SCRIPTED_TASKS)
    assert config.executor.kind == "processes" and config.executor.processes.workers >= 2
    assert load_config([*SCRIPTED_TASKS, "executor.kind=inprocess"]).executor.kind == "inprocess"


async def test_an_embedded_stack_runs_in_process_by_default_and_places_nothing() -> None:
    # A stack built in another program (the Gym agent, a notebook) starts no processes of its own
    # unless its configuration asks for them.
    config = validate_config({})
    assert config.executor.kind == "inprocess"
    executor = await make_executor(config.executor, None)
    assert isinstance(executor, InProcessExecutor)
    assert executor.nodes() == [] and executor.max_attempts == 1
    backends = object()
    assert with_cluster_backends(backends, executor) is backends  # type: ignore[arg-type]


def test_the_ray_section_is_validated_with_a_clear_error() -> None:
    ok = load_config(["executor.kind=ray", "executor.ray.slots_per_node=8", "executor.ray.resource=rollout"])
    assert ok.executor.ray.slots_per_node == 8 and ok.executor.ray.resource == "rollout"
    with pytest.raises(ConfigError, match=r"executor\.kind"):
        validate_config({"executor": {"kind": "slurm"}})
    with pytest.raises(ConfigError, match=r"executor\.ray\.slots_per_node"):
        validate_config({"executor": {"kind": "ray", "ray": {"slots_per_node": 0}}})
    with pytest.raises(ConfigError, match=r"executor\.ray\.nodes"):
        validate_config({"executor": {"ray": {"nodes": 3}}})


def test_each_node_takes_its_share_of_every_backend_cap() -> None:
    config = validate_config({"llm": {"balancer": {"max_in_flight": 32}}})
    assert node_llm_config(config.llm, NodeShare(index=0, count=3)).balancer.max_in_flight == 11
    assert node_llm_config(config.llm, NodeShare(index=0, count=64)).balancer.max_in_flight == 1
    assert config.llm.balancer.max_in_flight == 32  # the service's own config is untouched


def test_the_cluster_address_comes_from_config_then_environment_then_gym(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert resolve_address(None, None) is None  # a local Ray, only when asked for
    assert resolve_address(None, "10.0.0.1:6379") == "10.0.0.1:6379"
    monkeypatch.setenv("RAY_ADDRESS", "head:6379")
    assert resolve_address(None, "10.0.0.1:6379") == "head:6379"
    assert resolve_address("ray://other:10001", "10.0.0.1:6379") == "ray://other:10001"


async def test_a_node_resizes_every_backend_cap_when_the_node_count_changes() -> None:
    pool = LLMBackendPool(PoolConfig(balancer=BalancerConfig(max_in_flight=8), health_path=None))
    registry = PoolBackendRegistry(pool)
    shared = SharedBackends(registry, NodeShare(index=0, count=2), default_cap=32)
    try:
        await registry.add("http://a.invalid:8000", max_in_flight=16)  # from config: this node's 16 of 32
        await shared.add("http://b.invalid:8000", max_in_flight=10)  # through the API: cluster-wide 10
        caps = {a: pool.balancer.state(a).max_in_flight for a in pool.backends()}  # type: ignore[union-attr]
        assert sorted(caps.values()) == [5, 16]
        shared.reshare(NodeShare(index=0, count=4))  # two more nodes joined
        caps = {a: pool.balancer.state(a).max_in_flight for a in pool.backends()}  # type: ignore[union-attr]
        assert sorted(caps.values()) == [3, 8]  # ceil(10/4), 32/4
        shared.reshare(NodeShare(index=0, count=1))  # the others were lost: all of it
        caps = {a: pool.balancer.state(a).max_in_flight for a in pool.backends()}  # type: ignore[union-attr]
        assert sorted(caps.values()) == [10, 32]
    finally:
        await registry.aclose()


def test_executors_are_chosen_by_name_from_one_registry() -> None:
    assert {"inprocess", "ray"} <= set(EXECUTORS.names())  # the built-ins; users may add more
    with pytest.raises(ValueError, match="unknown executor 'slurm'"):
        EXECUTORS.factory("slurm")
