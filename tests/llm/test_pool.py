# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The LLM backend pool against real (fake) HTTP backends: down, hanging, 5xx, garbage and
wrong-shape answers, backends killed mid-trajectory, added, drained and removed at runtime."""

from __future__ import annotations

import asyncio
import gc
import time
from typing import Any

import pytest
from conftest import FakeFactory

from nemo_gym_prorl.llm.balancer import BalancerConfig
from nemo_gym_prorl.llm.errors import (
    AllBackendsDownError,
    BackendProtocolError,
    BackendRejectedError,
    BackendServerError,
    BackendTimeoutError,
    NoBackendError,
    RetriesExhaustedError,
)
from nemo_gym_prorl.llm.pool import LLMBackendPool, PoolConfig, Route, normalize_base_url, reply_json

BODY = {"model": "fake", "prompt": [1, 2, 3], "max_tokens": 4}


def config(*urls: str, **overrides: Any) -> PoolConfig:
    balancer = BalancerConfig(health_interval_s=overrides.pop("health_interval_s", 0.05), acquire_timeout_s=5)
    return PoolConfig(
        backends=list(urls),
        balancer=balancer,
        request_timeout_s=overrides.pop("request_timeout_s", 5.0),
        retry_backoff_s=0.01,
        retry_backoff_max_s=0.05,
        health_timeout_s=0.5,
        **overrides,
    )


def dead_url() -> str:
    import socket

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


def test_base_urls_with_and_without_v1_name_the_same_server() -> None:
    assert normalize_base_url("http://h:1/v1/") == normalize_base_url("h:1") == "http://h:1"


def test_a_reply_in_pythons_json_dialect_is_still_read_and_garbage_is_a_protocol_error() -> None:
    # A log-prob of -inf comes back as `-Infinity`, which Python's JSON writes and orjson refuses.
    reply = b'{"choices": [{"logprobs": {"token_logprobs": [-Infinity, -0.5]}}]}'
    assert reply_json(reply, "http://b", 200)["choices"][0]["logprobs"]["token_logprobs"] == [
        float("-inf"),
        -0.5,
    ]
    with pytest.raises(BackendProtocolError, match="not JSON"):
        reply_json(b"<html>busy</html>", "http://b", 200)


async def test_no_backend_configured_fails_at_once_with_a_clear_error() -> None:
    async with LLMBackendPool(config()) as pool:
        started = time.monotonic()
        with pytest.raises(NoBackendError, match="no backend is configured"):
            await pool.post_json("/v1/completions", BODY)
        assert time.monotonic() - started < 0.5


async def test_a_backend_down_at_start_is_ejected_and_joins_when_it_comes_up(fake_llm: FakeFactory) -> None:
    live = await fake_llm()
    down = dead_url()
    async with LLMBackendPool(config(down, live.url)) as pool:
        assert {e.address: e.healthy for e in pool.stats().endpoints} == {down: False, live.url: True}
        for i in range(4):
            _, reply = await pool.post_json("/v1/completions", BODY, route=Route(key=f"t{i}"))
            assert reply.backend == live.url
        late = await fake_llm(port=int(down.rsplit(":", 1)[1]))  # the backend finally starts
        await asyncio.sleep(0.3)  # a few health intervals
        assert all(e.healthy for e in pool.stats().endpoints)
        _, reply = await pool.post_json("/v1/completions", BODY, route=Route(key="fresh"))
        assert reply.backend == late.url  # least loaded: nothing bound to it yet


async def test_a_health_probe_tells_down_from_no_answer_in_time(fake_llm: FakeFactory) -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.read()  # accepts, never answers: a server too busy to answer in time
        finally:
            writer.close()

    listener = await asyncio.start_server(silent, "127.0.0.1", 0)
    busy = f"http://127.0.0.1:{listener.sockets[0].getsockname()[1]}"
    up = await fake_llm()
    try:
        async with LLMBackendPool(config(health_interval_s=3600)) as pool:
            assert await pool.probe(up.url) is True
            assert await pool.probe(dead_url()) is False  # refused: the process is gone
            assert await pool.probe(busy) is None  # inconclusive: the balancer counts these
            assert not await pool.add_backend(busy)
            assert pool.balancer.state(busy).last_error == "no answer in time when added"  # type: ignore[union-attr]
    finally:
        listener.close()
        listener.close_clients()
        await listener.wait_closed()


async def test_all_backends_down_is_a_typed_error_within_bounded_time() -> None:
    async with LLMBackendPool(config(dead_url(), dead_url())) as pool:
        started = time.monotonic()
        with pytest.raises(AllBackendsDownError, match="down"):
            await pool.post_json("/v1/completions", BODY)
        assert time.monotonic() - started < 3


async def test_a_500_is_retried_and_the_retry_succeeds(fake_llm: FakeFactory) -> None:
    backend = await fake_llm(faults=["500"])
    async with LLMBackendPool(config(backend.url)) as pool:
        route = Route(key="t")
        data, reply = await pool.post_json("/v1/completions", BODY, route=route)
        assert data["choices"][0]["token_ids"]
        assert reply.attempts == 2 and route.retried == 1


async def test_a_backend_that_keeps_failing_loses_its_trajectory_to_a_healthy_one(
    fake_llm: FakeFactory,
) -> None:
    sick = await fake_llm()
    async with LLMBackendPool(config(sick.url)) as pool:
        route = Route(key="t")
        await pool.post_json("/v1/completions", BODY, route=route)  # turn 0 binds t to `sick`
        healthy = await fake_llm()
        await pool.add_backend(healthy.url)
        sick.always = "500"  # its /health still says 200: only our requests see the problem
        route.turn = 1
        _, reply = await pool.post_json("/v1/completions", BODY, route=route)
        assert reply.backend == healthy.url
        assert [(r.turn, r.from_backend, r.to_backend) for r in route.reroutes] == [
            (1, sick.url, healthy.url)
        ]
        assert "BackendServerError" in route.reroutes[0].reason


async def test_persistent_500s_end_in_retries_exhausted_marked_as_infrastructure(
    fake_llm: FakeFactory,
) -> None:
    backend = await fake_llm(always="500")
    async with LLMBackendPool(config(backend.url, max_attempts=3)) as pool:
        with pytest.raises(RetriesExhaustedError) as caught:
            await pool.post_json("/v1/completions", BODY)
        assert caught.value.infrastructure
        assert [type(e) for e in caught.value.errors] == [BackendServerError] * 3


async def test_garbage_bodies_are_retried_as_protocol_errors(fake_llm: FakeFactory) -> None:
    backend = await fake_llm(faults=["garbage", "garbage"])
    async with LLMBackendPool(config(backend.url, max_attempts=3)) as pool:
        data, reply = await pool.post_json("/v1/completions", BODY)
        assert reply.attempts == 3 and "choices" in data
    backend.always = "garbage"
    async with LLMBackendPool(config(backend.url, max_attempts=2)) as pool:
        with pytest.raises(RetriesExhaustedError) as caught:
            await pool.post_json("/v1/completions", BODY)
        assert all(isinstance(e, BackendProtocolError) for e in caught.value.errors)


async def test_a_response_of_the_wrong_shape_is_a_protocol_error(fake_llm: FakeFactory) -> None:
    backend = await fake_llm()
    async with LLMBackendPool(config(backend.url, max_attempts=1)) as pool:
        with pytest.raises(RetriesExhaustedError) as caught:
            await pool.post_json("/v1/completions", BODY, parse=lambda data: data["no_such_field"])
        assert isinstance(caught.value.errors[0], BackendProtocolError)


async def test_a_hanging_backend_times_out_and_the_request_moves_on(fake_llm: FakeFactory) -> None:
    slow = await fake_llm(hang_s=3)
    async with LLMBackendPool(config(slow.url, request_timeout_s=0.3)) as pool:
        route = Route(key="t")
        await pool.post_json("/v1/completions", BODY, route=route)
        fast = await fake_llm()
        await pool.add_backend(fast.url)
        slow.always = "hang"
        started = time.monotonic()
        _, reply = await pool.post_json("/v1/completions", BODY, route=route)
        assert reply.backend == fast.url and time.monotonic() - started < 2
        assert "BackendTimeoutError" in route.reroutes[0].reason


async def test_timeouts_everywhere_end_the_request_within_bounded_time(fake_llm: FakeFactory) -> None:
    slow = await fake_llm(always="hang", hang_s=3)
    async with LLMBackendPool(config(slow.url, request_timeout_s=0.2, max_attempts=2)) as pool:
        started = time.monotonic()
        with pytest.raises((RetriesExhaustedError, AllBackendsDownError)) as caught:
            await pool.post_json("/v1/completions", BODY)
        assert time.monotonic() - started < 2.5
        if isinstance(caught.value, RetriesExhaustedError):
            assert isinstance(caught.value.errors[0], BackendTimeoutError)


async def test_a_4xx_is_not_retried_and_is_not_an_infrastructure_failure(fake_llm: FakeFactory) -> None:
    backend = await fake_llm(faults=["400"])
    async with LLMBackendPool(config(backend.url)) as pool:
        with pytest.raises(BackendRejectedError) as caught:
            await pool.post_json("/v1/completions", BODY)
        assert not caught.value.infrastructure and caught.value.status == 400
        assert len(backend.generation_requests()) == 1
        assert all(e.healthy for e in pool.stats().endpoints)


async def test_a_backend_killed_mid_trajectory_is_ejected_and_the_trajectory_moves(
    fake_llm: FakeFactory,
) -> None:
    a, b = await fake_llm(), await fake_llm()
    async with LLMBackendPool(config(a.url, b.url)) as pool:
        route = Route(key="t")
        _, first = await pool.post_json("/v1/completions", BODY, route=route)
        victim = a if first.backend == a.url else b
        survivor = b if victim is a else a
        await victim.kill()
        route.turn = 1
        _, second = await pool.post_json("/v1/completions", BODY, route=route)
        assert second.backend == survivor.url
        assert len(route.reroutes) == 1
        move = route.reroutes[0]
        assert (move.turn, move.from_backend, move.to_backend) == (1, victim.url, survivor.url)
        assert not pool.balancer.state(victim.url).healthy  # type: ignore[union-attr]


async def test_backends_can_be_added_drained_and_removed_at_runtime(fake_llm: FakeFactory) -> None:
    a, b = await fake_llm(), await fake_llm()
    async with LLMBackendPool(config(a.url)) as pool:
        assert await pool.add_backend(b.url + "/v1")
        assert sorted(pool.backends()) == sorted([a.url, b.url])
        assert await pool.drain_backend(a.url, timeout_s=1)
        assert pool.backends() == [b.url]
        pool.remove_backend(b.url)
        with pytest.raises(NoBackendError):
            await pool.post_json("/v1/completions", BODY)


async def test_many_concurrent_trajectories_spread_and_stay_sticky(fake_llm: FakeFactory) -> None:
    backends = [await fake_llm() for _ in range(3)]
    # No periodic probe: the fake backends answer from this test's busy event loop, and on a
    # loaded machine a probe could time out and eject them (health checks have their own tests).
    async with LLMBackendPool(config(*(b.url for b in backends), health_interval_s=3600)) as pool:
        homes: dict[str, set[str]] = {}

        async def trajectory(i: int) -> None:
            route = Route(key=f"t{i}")
            for _ in range(3):
                _, reply = await pool.post_json("/v1/completions", BODY, route=route)
                homes.setdefault(route.key, set()).add(reply.backend)

        await asyncio.gather(*(trajectory(i) for i in range(30)))
        assert all(len(h) == 1 for h in homes.values())
        assert pool.stats().sticky_hit_rate == 1.0
        per_backend = [sum(1 for h in homes.values() if b.url in h) for b in backends]
        assert min(per_backend) >= 5  # spread, not piled onto one


async def test_a_kept_alive_connection_the_server_closed_does_not_fail_the_health_probe() -> None:
    # The server answers the first request of each connection and keeps it alive, then closes
    # it when the next request arrives: its idle limit ran out just as the pool reused it.
    async def one_answer_per_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-type: application/json\r\n\r\n{}")
            await writer.drain()
            await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    listener = await asyncio.start_server(one_answer_per_connection, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{listener.sockets[0].getsockname()[1]}"
    try:
        async with LLMBackendPool(config(health_interval_s=3600)) as pool:
            for _ in range(3):
                assert await pool.probe(url) is True
    finally:
        listener.close()
        listener.close_clients()
        await listener.wait_closed()


async def test_a_model_call_leaves_nothing_for_the_cyclic_garbage_collector(fake_llm: FakeFactory) -> None:
    """What a request allocates is freed as its last reference goes. Objects in reference cycles
    wait for the cyclic collector instead, whose passes stop the event loop that drives every
    rollout of the process: at a thousand rollouts, a few dozen such objects per model call made
    those passes the loop's longest stalls."""
    backend = await fake_llm()
    async with LLMBackendPool(config(backend.url, health_interval_s=3600)) as pool:
        await pool.post_json("/v1/completions", BODY, route=Route(key="warm"))  # connections, caches
        calls = 50
        gc.collect()
        gc.disable()
        try:
            for i in range(calls):
                await pool.post_json("/v1/completions", BODY, route=Route(key=f"t{i}"))
            left_for_the_collector = gc.collect()
        finally:
            gc.enable()
    # Fewer than one per call (tenacity's retrying left 35): the fake backend answers on this
    # same loop, and its server's own objects would count here too.
    assert left_for_the_collector < calls, f"{left_for_the_collector} objects in cycles after {calls} calls"
