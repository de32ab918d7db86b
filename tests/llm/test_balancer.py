# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The generic balancer: least in-flight, sticky keys, caps, health, drain (no HTTP)."""

from __future__ import annotations

import asyncio
import time

import pytest

from nemo_gym_prorl.llm.balancer import Balancer, BalancerConfig
from nemo_gym_prorl.llm.errors import AllBackendsDownError, NoBackendError, PoolSaturatedError


def make(*addresses: str, **config: float) -> Balancer:
    balancer = Balancer(BalancerConfig(**config))  # type: ignore[arg-type]
    for address in addresses:
        balancer.add(address)
    return balancer


async def test_an_empty_balancer_says_no_backend_is_configured() -> None:
    with pytest.raises(NoBackendError):
        await make().acquire("t1")


async def test_pick_goes_to_the_endpoint_with_fewest_requests_in_flight() -> None:
    balancer = make("a", "b", "c")
    busy = [await balancer.acquire() for _ in range(3)]  # one each
    assert sorted(lease.address for lease in busy) == ["a", "b", "c"]
    balancer.release(busy[1])  # that endpoint now has the least in flight
    assert (await balancer.acquire()).address == busy[1].address


async def test_ties_go_to_the_endpoint_with_fewest_bound_trajectories() -> None:
    balancer = make("a", "b")
    first = await balancer.acquire("t1")
    balancer.release(first)  # nothing in flight anywhere, but t1 stays bound to its endpoint
    second = await balancer.acquire("t2")
    assert second.address != first.address


async def test_a_trajectory_sticks_to_its_endpoint_while_it_is_healthy() -> None:
    balancer = make("a", "b")
    home = await balancer.acquire("t1")
    balancer.release(home)
    hog = [await balancer.acquire() for _ in range(3)]  # make t1's endpoint the busier one
    assert sum(lease.address == home.address for lease in hog) >= 1
    for _ in range(5):
        again = await balancer.acquire("t1")
        assert again.address == home.address and again.moved_from is None
        balancer.release(again)
    assert balancer.stats().sticky_hit_rate == 1.0


async def test_a_full_endpoint_makes_callers_wait_for_a_slot() -> None:
    balancer = make("a", max_in_flight=1)
    held = await balancer.acquire("t1")
    waiter = asyncio.create_task(balancer.acquire("t2"))
    await asyncio.sleep(0.05)
    assert not waiter.done()
    balancer.release(held)
    assert (await asyncio.wait_for(waiter, 1)).address == "a"


async def test_a_changed_cap_takes_effect_for_new_requests_only() -> None:
    balancer = make("a", max_in_flight=2)
    held = [await balancer.acquire() for _ in range(2)]
    balancer.set_cap("a", 1)  # lowered below what is in flight: those finish, none start
    balancer.release(held[0])
    waiter = asyncio.create_task(balancer.acquire())
    await asyncio.sleep(0.05)
    assert not waiter.done()
    balancer.set_cap("a", 3)  # raised: the waiter gets its slot at once
    assert (await asyncio.wait_for(waiter, 1)).address == "a"
    with pytest.raises(ValueError):
        balancer.set_cap("a", 0)


async def test_changing_the_cap_of_a_draining_endpoint_keeps_it_draining() -> None:
    balancer = make("a", "b")
    lease = await balancer.acquire("t1")
    drain = asyncio.create_task(balancer.drain(lease.address, remove=False))
    await asyncio.sleep(0.02)
    balancer.set_cap(lease.address, 8)
    assert (await balancer.acquire("new")).address != lease.address
    balancer.release(lease)
    assert await asyncio.wait_for(drain, 1)


async def test_waiting_for_a_slot_is_bounded() -> None:
    balancer = make("a", max_in_flight=1, acquire_timeout_s=0.1)
    await balancer.acquire()
    started = time.monotonic()
    with pytest.raises(PoolSaturatedError):
        await balancer.acquire()
    assert time.monotonic() - started < 1


async def test_per_endpoint_caps_are_respected_under_load() -> None:
    balancer = make()
    balancer.add("small", max_in_flight=1)
    balancer.add("big", max_in_flight=5)
    leases = [await balancer.acquire() for _ in range(6)]
    assert sum(lease.address == "small" for lease in leases) == 1
    assert sum(lease.address == "big" for lease in leases) == 5


async def test_a_fatal_failure_ejects_the_endpoint_and_moves_its_trajectories() -> None:
    balancer = make("a", "b")
    home = await balancer.acquire("t1")
    balancer.release(home)
    balancer.report_failure(home.address, "connection refused", fatal=True)
    moved = await balancer.acquire("t1")
    assert moved.address != home.address
    assert moved.moved_from == home.address
    assert "connection refused" in (moved.move_reason or "")
    assert balancer.stats().sticky_moves == 1


async def test_consecutive_failures_eject_and_a_success_resets_the_count() -> None:
    balancer = make("a", eject_after_failures=2)
    balancer.report_failure("a", "500")
    balancer.report_success("a")
    balancer.report_failure("a", "500")
    assert balancer.state("a").healthy  # type: ignore[union-attr]
    balancer.report_failure("a", "500")
    assert not balancer.state("a").healthy  # type: ignore[union-attr]
    with pytest.raises(AllBackendsDownError, match="500"):
        await balancer.acquire("t1")


async def test_a_good_probe_readmits_an_ejected_endpoint() -> None:
    alive = {"a": False}

    async def probe(address: str) -> bool:
        return alive[address]

    balancer = Balancer(BalancerConfig(health_interval_s=0.02), probe=probe)
    balancer.add("a", healthy=False)
    balancer.start()
    try:
        with pytest.raises(AllBackendsDownError):
            await balancer.acquire()
        alive["a"] = True
        await asyncio.sleep(0.1)
        assert (await balancer.acquire()).address == "a"
    finally:
        await balancer.close()


async def test_a_failure_triggers_an_immediate_probe() -> None:
    probed: list[str] = []

    async def probe(address: str) -> bool:
        probed.append(address)
        return False

    balancer = Balancer(BalancerConfig(health_interval_s=3600), probe=probe)
    balancer.add("a")
    balancer.report_failure("a", "timeout")
    await asyncio.sleep(0.01)
    assert probed == ["a"]
    assert not balancer.state("a").healthy  # type: ignore[union-attr]
    await balancer.close()


async def test_a_probe_left_unanswered_ejects_only_when_enough_in_a_row_are() -> None:
    answers: list[bool | None] = [None, None, True, None, None, None]

    async def probe(address: str) -> bool | None:
        return answers.pop(0)

    balancer = Balancer(BalancerConfig(health_interval_s=3600, eject_after_probe_timeouts=3), probe=probe)
    balancer.add("a")
    health = []
    for _ in range(6):
        await balancer.probe_all()
        health.append(balancer.state("a").healthy)  # type: ignore[union-attr]
    # a loaded server answering late is not taken out; the third silence in a row is
    assert health == [True, True, True, True, True, False]
    assert "3 health probes in a row got no answer" in (balancer.state("a").last_error or "")  # type: ignore[union-attr]
    await balancer.close()


async def test_a_probe_left_unanswered_does_not_readmit_an_ejected_endpoint() -> None:
    async def probe(address: str) -> bool | None:
        return None

    balancer = Balancer(BalancerConfig(health_interval_s=3600), probe=probe)
    balancer.add("a", healthy=False)
    await balancer.probe_all()
    assert not balancer.state("a").healthy  # type: ignore[union-attr]
    await balancer.close()


async def test_drain_stops_new_trajectories_waits_for_in_flight_then_removes() -> None:
    balancer = make("a", "b")
    on_a = await balancer.acquire("t1")
    if on_a.address != "a":
        on_a, other = await balancer.acquire("t2"), on_a
        balancer.release(other)
    drain = asyncio.create_task(balancer.drain("a"))
    await asyncio.sleep(0.02)
    assert not drain.done()  # a request is still in flight on a
    assert (await balancer.acquire("new")).address == "b"  # no new trajectory lands on a
    balancer.release(on_a)
    assert await asyncio.wait_for(drain, 1)
    assert balancer.addresses() == ["b"]
    moved = await balancer.acquire(on_a.key)
    assert moved.address == "b" and moved.moved_from == "a" and moved.move_reason == "removed"


async def test_drain_gives_up_after_its_timeout_and_keeps_the_endpoint_draining() -> None:
    balancer = make("a")
    await balancer.acquire()
    assert not await balancer.drain("a", timeout_s=0.05)
    assert balancer.state("a").draining  # type: ignore[union-attr]
    balancer.add("a")  # re-adding undrains
    assert not balancer.state("a").draining  # type: ignore[union-attr]


async def test_a_removed_endpoint_can_be_added_again() -> None:
    balancer = make("a")
    balancer.remove("a")
    with pytest.raises(NoBackendError):
        await balancer.acquire()
    balancer.add("a")
    assert (await balancer.acquire()).address == "a"


async def test_retries_avoid_the_endpoint_that_just_failed_if_another_exists() -> None:
    balancer = make("a", "b")
    home = await balancer.acquire("t1")
    balancer.release(home)
    retry = await balancer.acquire("t1", avoid={home.address})
    assert retry.address != home.address and retry.moved_from == home.address
    solo = make("a")
    assert (await solo.acquire("t1", avoid={"a"})).address == "a"  # nowhere else to go


async def test_the_heap_stays_small_under_many_operations() -> None:
    balancer = make("a", "b", "c", "d")
    for i in range(5000):
        lease = await balancer.acquire(f"t{i % 50}")
        balancer.release(lease)
    assert len(balancer._heap) <= 4 * 4 + 64 + 1
    assert sum(e.served for e in balancer.stats().endpoints) == 5000


async def test_forgetting_a_finished_trajectory_frees_its_binding() -> None:
    balancer = make("a")
    balancer.release(await balancer.acquire("t1"))
    assert balancer.stats().endpoints[0].bound == 1
    balancer.forget("t1")
    assert balancer.stats().endpoints[0].bound == 0
