# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Policy versions against fake vLLM backends with runtime LoRA: a publish reaches every
backend before a new turn uses it, failures eject and are reported, late backends load the
current version before taking traffic, unused versions are unloaded, and every turn records
the version that sampled it."""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path

import httpx
import pytest
from conftest import FakeFactory, fast_pool
from pydantic import ValidationError

from nemo_gym_prorl.llm.access import LLMAccess
from nemo_gym_prorl.llm.dialects.vllm import VLLMCompletionsDialect
from nemo_gym_prorl.llm.policy import (
    PolicyError,
    PolicyLoadError,
    PolicySource,
    PolicyVersionError,
    PublishRequest,
    restore_launch_weights,
)
from nemo_gym_prorl.llm.pool import LLMBackendPool
from nemo_gym_prorl.llm.tito import TokenSession

SYSTEM = {"role": "system", "content": "You are terse."}
USER = {"role": "user", "content": "Hi."}


def pool_for(*urls: str) -> LLMBackendPool:
    # A probe gets 5 s: on a loaded machine (three test workers on two cores) 0.5 s was missed.
    return fast_pool(*urls, balancer={"acquire_timeout_s": 5}, retry_backoff_max_s=0.05, health_timeout_s=5)


def adapter(tmp_path: Path, name: str) -> PolicySource:
    """A directory the fake backend accepts as a PEFT adapter."""
    directory = tmp_path / name
    directory.mkdir()
    (directory / "adapter_config.json").write_text('{"r": 16}')
    return PolicySource(adapter_path=str(directory))


async def refused(pool: LLMBackendPool, version: int, source: PolicySource) -> PolicyLoadError:
    """Publishing `source` as `version` is refused by every backend: the error says which version
    keeps serving, and that one still does."""
    current = pool.policy.version
    with pytest.raises(
        PolicyLoadError,
        match=rf"version {version} .*loaded by no backend, so version {current} keeps serving",
    ) as info:
        await pool.policy.publish(version, source)
    assert pool.policy.version == current
    return info.value


def session(pool: LLMBackendPool, key: str = "t") -> TokenSession:
    return TokenSession(pool, VLLMCompletionsDialect(), model="fake", trajectory_id=key)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def eventually(condition: object, timeout_s: float = 3.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not condition():  # type: ignore[operator]
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.02)


async def test_a_publish_loads_the_adapter_on_every_backend_before_the_next_turn_uses_it(
    fake_llm: FakeFactory, tmp_path: Path
) -> None:
    a, b = await fake_llm(strict_model=True), await fake_llm(strict_model=True)
    async with pool_for(a.url, b.url) as pool:
        before = await session(pool, "before").generate([SYSTEM, USER])
        report = await pool.policy.publish(1, adapter(tmp_path, "step1"))
        assert a.loras == b.loras == {"policy-v1": str(tmp_path / "step1")}
        assert sorted(report.loaded) == sorted([a.url, b.url]) and report.failed == []
        turns = [await session(pool, f"t{i}").generate([SYSTEM, USER]) for i in range(4)]
    assert before.policy_version is None and not before.text.startswith("[")
    assert {t.policy_version for t in turns} == {1}
    assert all(t.text.startswith("[policy-v1] ") for t in turns)  # the adapter answered
    assert {t.backend for t in turns} == {a.url, b.url}
    assert {r["model"] for r in a.generation_requests() + b.generation_requests()} == {"fake", "policy-v1"}


async def test_a_turn_keeps_the_version_it_started_with_and_the_next_turn_uses_the_new_one(
    fake_llm: FakeFactory, tmp_path: Path
) -> None:
    backend = await fake_llm(strict_model=True, hang_s=0.5)
    async with pool_for(backend.url) as pool:
        await pool.policy.publish(1, adapter(tmp_path, "step1"))
        trajectory = session(pool)
        backend.faults = ["hang"]  # the first turn is slow: the publish lands during it
        first = asyncio.create_task(trajectory.generate([SYSTEM, USER]))
        await eventually(lambda: len(backend.generation_requests()) == 1)
        report = await pool.policy.publish(2, adapter(tmp_path, "step2"))
        assert report.unloaded == []  # version 1 is still in use by the turn in flight
        assert set(backend.loras) == {"policy-v1", "policy-v2"}
        assert pool.policy.in_use() == {1: 1}
        turn1 = await first
        turn2 = await trajectory.generate([{"role": "user", "content": "More."}])
        await eventually(lambda: set(backend.loras) == {"policy-v2"})  # unloaded once unused
        record = trajectory.record()
    assert (turn1.policy_version, turn2.policy_version) == (1, 2)
    assert turn1.text.startswith("[policy-v1] ") and turn2.text.startswith("[policy-v2] ")
    assert record.policy_versions == [1, 2]
    assert pool.policy.in_use() == {}


async def test_a_backend_that_fails_to_load_is_ejected_and_reported_and_the_other_serves_the_new_version(
    fake_llm: FakeFactory, tmp_path: Path
) -> None:
    good = await fake_llm(strict_model=True)
    bad = await fake_llm(strict_model=True, lora_load_error="not enough memory for the adapter")
    async with pool_for(good.url, bad.url) as pool:
        report = await pool.policy.publish(1, adapter(tmp_path, "step1"))
        [failed] = [b for b in report.backends if not b.loaded]
        assert report.loaded == [good.url]
        assert failed.backend == bad.url and failed.ejected
        assert "not enough memory" in (failed.reason or "")
        served_before = len(bad.generation_requests())
        turns = [await session(pool, f"t{i}").generate([SYSTEM, USER]) for i in range(4)]
        await asyncio.sleep(0.3)  # several health rounds: the probe retries the load and fails
        state = pool.balancer.state(bad.url)
        assert state is not None and not state.healthy
        assert "policy version 1 failed to load" in (state.last_error or "")
    assert {t.backend for t in turns} == {good.url}
    assert {t.policy_version for t in turns} == {1}
    assert len(bad.generation_requests()) == served_before  # it served nothing, old or new


async def test_a_bad_adapter_path_is_a_clear_error_and_the_old_version_keeps_serving(
    fake_llm: FakeFactory, tmp_path: Path
) -> None:
    a, b = await fake_llm(strict_model=True), await fake_llm(strict_model=True)
    async with pool_for(a.url, b.url) as pool:
        await pool.policy.publish(1, adapter(tmp_path, "step1"))
        missing = str(tmp_path / "no-such-adapter")
        error = await refused(pool, 2, PolicySource(adapter_path=missing))
        assert missing in error.message and "No adapter found" in error.message
        assert error.report.loaded == []
        assert all(e.healthy for e in pool.stats().endpoints)  # nobody ejected for a bad path
        turn = await session(pool).generate([SYSTEM, USER])
        # A retry of the same version with a good path works.
        await pool.policy.publish(2, adapter(tmp_path, "step2"))
    assert turn.policy_version == 1 and turn.text.startswith("[policy-v1] ")


async def test_a_backend_without_runtime_lora_says_how_to_start_it(
    fake_llm: FakeFactory, tmp_path: Path
) -> None:
    backend = await fake_llm(lora_api=False)
    async with pool_for(backend.url) as pool:
        with pytest.raises(PolicyLoadError, match=r"--enable-lora .*VLLM_ALLOW_RUNTIME_LORA_UPDATING=True"):
            await pool.policy.publish(1, adapter(tmp_path, "step1"))


async def test_a_first_publish_that_fails_keeps_the_base_model_serving(
    fake_llm: FakeFactory, tmp_path: Path
) -> None:
    backend = await fake_llm(strict_model=True)
    async with pool_for(backend.url) as pool:
        with pytest.raises(PolicyLoadError, match="the base model keeps serving"):
            await pool.policy.publish(1, PolicySource(adapter_path=str(tmp_path / "missing")))
        turn = await session(pool).generate([SYSTEM, USER])
    assert turn.policy_version is None and backend.generation_requests()[-1]["model"] == "fake"


async def test_a_backend_that_comes_up_later_loads_the_current_version_before_taking_traffic(
    fake_llm: FakeFactory, tmp_path: Path
) -> None:
    live = await fake_llm(strict_model=True)
    port = free_port()
    async with pool_for(live.url, f"http://127.0.0.1:{port}") as pool:
        await pool.policy.publish(1, adapter(tmp_path, "step1"))
        await session(pool, "early").generate([SYSTEM, USER])  # bound to the live backend
        late = await fake_llm(strict_model=True, port=port)
        await eventually(lambda: all(e.healthy for e in pool.stats().endpoints))
        assert late.loras == {"policy-v1": str(tmp_path / "step1")}
        turn = await session(pool, "fresh").generate([SYSTEM, USER])  # least loaded: the late one
    assert turn.backend == late.url and turn.policy_version == 1
    paths = late.paths()
    assert paths.index("/v1/load_lora_adapter") < paths.index("/v1/completions")


async def test_a_backend_added_at_runtime_that_cannot_load_the_current_version_stays_out(
    fake_llm: FakeFactory, tmp_path: Path
) -> None:
    live = await fake_llm(strict_model=True)
    broken = await fake_llm(strict_model=True, lora_load_error="LoRA is not enabled")
    async with pool_for(live.url) as pool:
        await pool.policy.publish(1, adapter(tmp_path, "step1"))
        assert await pool.add_backend(broken.url) is False
        await asyncio.sleep(0.2)
        state = pool.balancer.state(broken.url)
        assert state is not None and not state.healthy and "LoRA is not enabled" in (state.last_error or "")
        turns = [await session(pool, f"t{i}").generate([SYSTEM, USER]) for i in range(3)]
    assert {t.backend for t in turns} == {live.url}
    assert broken.generation_requests() == []


async def test_versions_no_longer_in_use_are_unloaded_from_every_backend(
    fake_llm: FakeFactory, tmp_path: Path
) -> None:
    a, b = await fake_llm(), await fake_llm()
    async with pool_for(a.url, b.url) as pool:
        for version in (1, 2, 3):
            report = await pool.policy.publish(version, adapter(tmp_path, f"step{version}"))
            assert report.unloaded == ([f"policy-v{version - 1}"] if version > 1 else [])
        assert set(a.loras) == set(b.loras) == {"policy-v3"}
        assert pool.policy.loaded_on(a.url) == {3}
    unloads = [body["lora_name"] for path, body in a.requests if path == "/v1/unload_lora_adapter"]
    assert unloads == ["policy-v1", "policy-v2"]


async def test_a_version_that_does_not_increase_is_refused(fake_llm: FakeFactory, tmp_path: Path) -> None:
    backend = await fake_llm()
    async with pool_for(backend.url) as pool:
        await pool.policy.publish(2, adapter(tmp_path, "step2"))
        for stale in (2, 1):
            with pytest.raises(PolicyVersionError, match=rf"version {stale} refused.*current: 2"):
                await pool.policy.publish(stale, adapter(tmp_path, f"again{stale}"))
        with pytest.raises(PolicyVersionError):
            await pool.policy.publish(0, adapter(tmp_path, "zero"))
        assert pool.policy.version == 2 and set(backend.loras) == {"policy-v2"}


def weights(tmp_path: Path, name: str) -> PolicySource:
    """A directory the fake backend accepts as a full checkpoint."""
    directory = tmp_path / name
    directory.mkdir()
    (directory / "config.json").write_text("{}")
    return PolicySource(weights_path=str(directory))


async def test_full_weights_are_reloaded_on_every_backend_and_served_under_the_base_name(
    fake_llm: FakeFactory, tmp_path: Path
) -> None:
    a, b = await fake_llm(strict_model=True), await fake_llm(strict_model=True)
    async with pool_for(a.url, b.url) as pool:
        report = await pool.policy.publish(1, weights(tmp_path, "merged1"))
        turns = [await session(pool, f"t{i}").generate([SYSTEM, USER]) for i in range(4)]
        assert pool.policy.served_model("fake") == "fake"
    assert a.weights == b.weights == str(tmp_path / "merged1") and a.loras == b.loras == {}
    assert report.served_name is None and sorted(report.loaded) == sorted([a.url, b.url])
    assert {t.policy_version for t in turns} == {1}
    assert all(t.text.startswith("[weights:merged1] ") for t in turns)
    for backend in (a, b):  # the prefix cache was computed by the old weights: dropped after the swap
        paths = [path for path, _ in backend.requests]
        assert (
            paths.index("/collective_rpc")
            < paths.index("/reset_prefix_cache")
            < paths.index("/v1/completions")
        )


async def test_a_weights_swap_waits_for_the_turns_in_flight_and_holds_new_turns_until_it_is_done(
    fake_llm: FakeFactory, tmp_path: Path
) -> None:
    backend = await fake_llm(hang_s=0.5)
    async with pool_for(backend.url) as pool:
        backend.faults = ["hang"]  # the first turn takes 0.5 s
        in_flight = asyncio.create_task(session(pool, "old").generate([SYSTEM, USER]))
        await eventually(lambda: pool.policy._turns == 1)
        publish = asyncio.create_task(pool.policy.publish(1, weights(tmp_path, "merged1")))
        await asyncio.sleep(0.05)
        waiting = asyncio.create_task(session(pool, "new").generate([SYSTEM, USER]))
        old, report, new = await asyncio.gather(in_flight, publish, waiting)
    assert old.policy_version is None and not old.text.startswith(
        "[weights:"
    )  # sampled by the launch weights
    assert new.policy_version == 1 and new.text.startswith("[weights:merged1] ")
    assert report.drained_s > 0.2


async def test_a_weights_swap_that_turns_in_flight_do_not_let_happen_in_time_keeps_the_old_policy(
    fake_llm: FakeFactory, tmp_path: Path
) -> None:
    backend = await fake_llm(hang_s=2.0)
    async with pool_for(backend.url) as pool:
        pool.policy.load_timeout_s = 0.2
        backend.faults = ["hang"]
        in_flight = asyncio.create_task(session(pool, "old").generate([SYSTEM, USER]))
        await eventually(lambda: pool.policy._turns == 1)
        with pytest.raises(PolicyLoadError, match=r"1 turn\(s\) still in flight.*base model keeps serving"):
            await pool.policy.publish(1, weights(tmp_path, "merged1"))
        await in_flight
        after = await session(pool, "after").generate([SYSTEM, USER])  # new turns were let through again
    assert backend.weights is None and after.policy_version is None


async def test_a_backend_without_development_mode_says_how_to_start_it_and_is_left_out(
    fake_llm: FakeFactory, tmp_path: Path
) -> None:
    able, unable = await fake_llm(), await fake_llm(reload_api=False)
    async with pool_for(able.url, unable.url) as pool:
        report = await pool.policy.publish(1, weights(tmp_path, "merged1"))
        assert report.loaded == [able.url]
        assert "VLLM_SERVER_DEV_MODE=1" in (report.backends[1].reason or "") and report.backends[1].ejected
        turns = [await session(pool, f"t{i}").generate([SYSTEM, USER]) for i in range(3)]
    assert {t.backend for t in turns} == {able.url}


async def test_weights_that_no_backend_can_read_are_a_clear_error_and_the_old_version_keeps_serving(
    fake_llm: FakeFactory, tmp_path: Path
) -> None:
    backend = await fake_llm()
    async with pool_for(backend.url) as pool:
        await pool.policy.publish(1, weights(tmp_path, "merged1"))
        await refused(pool, 2, PolicySource(weights_path=str(tmp_path / "missing")))
        # The failed reload ejected it; the probe reloads the weights that are current.
        await eventually(lambda: pool.stats().endpoints[0].healthy)
        turn = await session(pool).generate([SYSTEM, USER])
    assert turn.policy_version == 1 and turn.text.startswith("[weights:merged1] ")


async def test_an_adapter_published_after_full_weights_is_served_over_them_and_a_restarted_backend_gets_both(
    fake_llm: FakeFactory, tmp_path: Path
) -> None:
    backend = await fake_llm(strict_model=True)
    async with pool_for(backend.url) as pool:
        await pool.policy.publish(1, weights(tmp_path, "merged1"))
        report = await pool.policy.publish(2, adapter(tmp_path, "step2"))
        current = pool.policy.current
        assert current is not None and current.base_version == 1 and report.served_name == "policy-v2"
        # The backend restarts: launch weights, no adapter.
        port = backend.port
        await backend.kill()
        await eventually(lambda: not pool.stats().endpoints[0].healthy)
        restarted = await fake_llm(strict_model=True, port=port)
        await eventually(lambda: pool.stats().endpoints[0].healthy)
        turn = await session(pool).generate([SYSTEM, USER])
    assert restarted.weights == str(tmp_path / "merged1") and "policy-v2" in restarted.loras
    paths = [path for path, _ in restarted.requests]
    assert (
        paths.index("/collective_rpc") < paths.index("/v1/load_lora_adapter") < paths.index("/v1/completions")
    )
    assert turn.policy_version == 2 and turn.text.startswith("[policy-v2] ")


def test_a_policy_source_names_exactly_one_path() -> None:
    for bad in ({}, {"adapter_path": "/a", "weights_path": "/w"}, {"adapter_path": ""}):
        with pytest.raises(ValidationError, match="exactly one"):
            PolicySource.model_validate(bad)


async def test_the_model_name_of_new_turns_follows_the_published_version(
    fake_llm: FakeFactory, tmp_path: Path
) -> None:
    backend = await fake_llm()
    async with pool_for(backend.url) as pool:
        access = LLMAccess(pool=pool, dialect=VLLMCompletionsDialect())
        assert await access.model_name() == "fake"
        await pool.policy.publish(1, adapter(tmp_path, "step1"))
        assert await access.model_name() == "policy-v1"
        access.model = None  # rediscovery lists the adapter too, but the base is the base
        assert await access.model_name() == "policy-v1" and access.model == "fake"


async def test_a_publish_request_as_a_trainer_sends_it_is_published_and_shown_in_the_status(
    fake_llm: FakeFactory, tmp_path: Path
) -> None:
    backend = await fake_llm()
    path = adapter(tmp_path, "step1").adapter_path
    request = PublishRequest.model_validate({"version": 1, "adapter_path": path})
    async with pool_for(backend.url) as pool:
        await pool.policy.publish(request.version, request.source())
        status = pool.policy.status()
    assert status.current is not None and status.current.served_name == "policy-v1"
    assert status.loaded == {backend.url: [1]} and status.in_use == {}
    with pytest.raises(ValidationError):
        PublishRequest.model_validate({"version": 0, "adapter_path": path})


async def test_an_adapter_left_under_the_same_name_by_an_earlier_run_is_replaced(
    fake_llm: FakeFactory, tmp_path: Path
) -> None:
    backend = await fake_llm(loras={"policy-v1": "/old/run/step1"})
    async with pool_for(backend.url) as pool:
        await pool.policy.publish(1, adapter(tmp_path, "step1"))
    assert backend.loras == {"policy-v1": str(tmp_path / "step1")}


async def test_a_publish_cut_short_leaves_the_old_version_serving_and_nothing_loaded(
    fake_llm: FakeFactory, tmp_path: Path
) -> None:
    fast, slow = await fake_llm(), await fake_llm()
    async with pool_for(fast.url, slow.url) as pool:
        # The slow backend's load never answers in time; the caller gives up.
        pool.policy.load_timeout_s = 30
        slow.lora_load_delay_s = 10
        publish = asyncio.create_task(pool.policy.publish(1, adapter(tmp_path, "step1")))
        await eventually(lambda: "policy-v1" in fast.loras)
        publish.cancel()
        with pytest.raises(asyncio.CancelledError):
            await publish
        await eventually(lambda: fast.loras == {})
        assert pool.policy.version is None


def launched_backend(
    models: list[dict], routes: list[str], calls: list[tuple[str, object]]
) -> httpx.AsyncClient:
    """A vLLM as `restore_launch_weights` sees it: its models, its routes, and every POST recorded."""

    def answer(request: httpx.Request) -> httpx.Response:
        if request.method == "GET" and request.url.path == "/v1/models":
            return httpx.Response(200, json={"data": models})
        if request.method == "GET" and request.url.path == "/openapi.json":
            return httpx.Response(200, json={"paths": {route: {} for route in routes}})
        calls.append((request.url.path, json.loads(request.content) if request.content else None))
        return httpx.Response(200, json={})

    return httpx.AsyncClient(transport=httpx.MockTransport(answer))


RUN_TIME_ROUTES = ["/v1/models", "/v1/load_lora_adapter", "/v1/unload_lora_adapter", "/collective_rpc"]


async def test_restoring_a_backend_unloads_every_adapter_then_reloads_its_launch_weights() -> None:
    calls: list[tuple[str, object]] = []
    models = [{"id": "base", "parent": None}, {"id": "policy-v3", "parent": "base"}]
    async with launched_backend(models, RUN_TIME_ROUTES, calls) as client:
        await restore_launch_weights(client, "http://b", served_name="base", weights_path="/models/base")
    assert calls == [
        ("/v1/unload_lora_adapter", {"lora_name": "policy-v3"}),
        (
            "/collective_rpc",
            {"method": "reload_weights", "kwargs": {"weights_path": "/models/base"}, "timeout": 120.0},
        ),
        ("/reset_prefix_cache", None),
    ]


async def test_a_backend_serving_another_model_is_refused_before_anything_changes() -> None:
    calls: list[tuple[str, object]] = []
    async with launched_backend([{"id": "other", "parent": None}], RUN_TIME_ROUTES, calls) as client:
        with pytest.raises(PolicyError, match=r"serves \['other'\], not 'base'"):
            await restore_launch_weights(client, "http://b", served_name="base", weights_path="/m")
    assert calls == []


@pytest.mark.parametrize(
    ("missing", "says"),
    [("/v1/load_lora_adapter", "runtime LoRA"), ("/collective_rpc", "VLLM_SERVER_DEV_MODE")],
)
async def test_a_backend_that_cannot_take_published_policies_is_refused_saying_how_to_start_it(
    missing: str, says: str
) -> None:
    calls: list[tuple[str, object]] = []
    routes = [r for r in RUN_TIME_ROUTES if r != missing]
    async with launched_backend([{"id": "base", "parent": None}], routes, calls) as client:
        with pytest.raises(PolicyError, match=says):
            await restore_launch_weights(client, "http://b", served_name="base", weights_path="/m")
    assert calls == []


async def test_a_server_that_does_not_answer_as_vllm_is_refused() -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text="<html>a proxy's login page</html>")

    async with httpx.AsyncClient(transport=httpx.MockTransport(answer)) as client:
        with pytest.raises(PolicyError, match=r"not answer /v1/models and /openapi\.json as vLLM"):
            await restore_launch_weights(client, "http://b", served_name="base", weights_path="/m")


async def test_a_backend_nobody_listens_on_is_refused_saying_so() -> None:
    async with httpx.AsyncClient() as client:
        with pytest.raises(PolicyError, match="does not answer: ConnectError"):
            await restore_launch_weights(
                client, f"http://127.0.0.1:{free_port()}", served_name="base", weights_path="/m"
            )
