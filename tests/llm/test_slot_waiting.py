# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Waiting for a model slot: first come, first served; a finish wakes exactly one waiter;
nobody starves; trajectories keep their backend; waits are told to the caller's budget."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Generator
from typing import Any

import pytest
from conftest import FakeFactory, fast_pool

from nemo_gym_prorl.llm.balancer import Balancer, BalancerConfig, Lease
from nemo_gym_prorl.llm.errors import AllBackendsDownError, PoolSaturatedError
from nemo_gym_prorl.llm.pool import Route
from nemo_gym_prorl.llm.slot_wait import SlotWaitClock, listen

BODY = {"model": "fake", "prompt": [1, 2, 3], "max_tokens": 4}


class Resumptions(Coroutine[Any, Any, Any]):
    """Wraps a coroutine and counts the steps its task runs: the first, plus one per wake-up."""

    def __init__(self, coro: Coroutine[Any, Any, Any]) -> None:
        self._coro = coro
        self.steps = 0

    def send(self, value: Any) -> Any:
        self.steps += 1
        return self._coro.send(value)

    def throw(self, *args: Any) -> Any:
        self.steps += 1
        return self._coro.throw(*args)

    def close(self) -> None:
        self._coro.close()

    def __next__(self) -> Any:
        return self.send(None)

    def __await__(self) -> Generator[Any, None, Any]:
        return self._coro.__await__()

    @property
    def wakeups(self) -> int:
        return max(0, self.steps - 1)


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_waiters_are_served_in_arrival_order_and_each_finish_wakes_exactly_one() -> None:
    balancer = Balancer(BalancerConfig(max_in_flight=2))
    balancer.add("only")
    counted = [Resumptions(balancer.acquire(f"t{i}")) for i in range(50)]
    tasks = [asyncio.create_task(c) for c in counted]  # type: ignore[arg-type]
    await settle()
    held: list[Lease] = [tasks[0].result(), tasks[1].result()]
    assert all(not t.done() for t in tasks[2:])
    assert balancer.stats().waiting == 48

    for nxt in range(2, 50):
        before = sum(c.wakeups for c in counted)
        balancer.release(held.pop(0))
        await settle()
        assert [i for i, t in enumerate(tasks) if t.done()] == list(range(nxt + 1))  # the next in line
        assert sum(c.wakeups for c in counted) == before + 1  # and nobody else woke
        held.append(tasks[nxt].result())

    stats = balancer.stats()
    assert stats.waiting == 0 and stats.waited == 48 and stats.wakeups == 48
    assert all(c.wakeups <= 1 for c in counted)


async def test_a_freed_slot_goes_to_the_earliest_waiter_that_may_use_it() -> None:
    balancer = Balancer(BalancerConfig(max_in_flight=1))
    balancer.add("a")
    balancer.add("b")
    on_a = await balancer.acquire("ta")
    on_b = await balancer.acquire("tb")
    assert {on_a.address, on_b.address} == {"a", "b"}
    b_key = "tb"
    # tb lives on b: it waits for b, while a new trajectory behind it may take any endpoint.
    stuck = asyncio.create_task(balancer.acquire(b_key))
    newcomer = asyncio.create_task(balancer.acquire("fresh"))
    await settle()
    balancer.release(on_a)
    await settle()
    assert newcomer.done() and newcomer.result().address == on_a.address
    assert not stuck.done()  # a's slot is not its to take: its prefix cache is on b
    balancer.release(on_b)
    await settle()
    assert stuck.result().address == on_b.address and stuck.result().moved_from is None


async def test_a_waiter_whose_endpoint_is_ejected_moves_and_keeps_its_place() -> None:
    balancer = Balancer(BalancerConfig(max_in_flight=1))
    balancer.add("a")
    balancer.add("b")
    first = await balancer.acquire("t1")
    other = await balancer.acquire("t2")
    waiting = asyncio.create_task(balancer.acquire("t1"))  # behind its own request on t1's endpoint
    behind = asyncio.create_task(balancer.acquire("t3"))
    await settle()
    balancer.report_failure(first.address, "connection refused", fatal=True)
    balancer.release(other)
    await settle()
    moved = waiting.result()
    assert moved.address == other.address and moved.moved_from == first.address
    assert not behind.done()  # it arrived later
    balancer.release(moved)
    await settle()
    assert behind.result().address == other.address


async def test_waiters_are_refused_when_every_backend_goes_down_and_a_timed_out_one_leaves_the_line() -> None:
    balancer = Balancer(BalancerConfig(max_in_flight=1, acquire_timeout_s=0.05))
    balancer.add("a")
    held = await balancer.acquire()
    with pytest.raises(PoolSaturatedError):
        await balancer.acquire()
    assert balancer.stats().waiting == 0
    balancer.report_failure("a", "engine dead", fatal=True)
    balancer.release(held)
    with pytest.raises(AllBackendsDownError, match="engine dead"):
        await balancer.acquire()


async def test_a_cancelled_waiter_passes_its_slot_on() -> None:
    balancer = Balancer(BalancerConfig(max_in_flight=1))
    balancer.add("a")
    held = await balancer.acquire()
    gives_up = asyncio.create_task(balancer.acquire())
    next_one = asyncio.create_task(balancer.acquire())
    await settle()
    balancer.release(held)  # handed to `gives_up`, which is cancelled before it runs
    gives_up.cancel()
    await settle()
    assert gives_up.cancelled()
    assert next_one.result().address == "a"
    assert balancer.state("a").in_flight == 1  # type: ignore[union-attr]


async def test_a_slot_wait_stops_the_callers_clock_and_is_measured() -> None:
    balancer = Balancer(BalancerConfig(max_in_flight=1))
    balancer.add("a")
    held = await balancer.acquire()
    clock = SlotWaitClock()

    async def caller() -> Lease:
        with listen(clock):
            async with asyncio.timeout(0.05) as timer:
                with clock.pausing(timer, lambda: 0.05):
                    return await balancer.acquire()

    task = asyncio.create_task(caller())
    await asyncio.sleep(0.2)  # four times the caller's budget, all of it spent waiting
    assert clock.waiting and not task.done()
    balancer.release(held)
    assert (await task).address == "a"  # no timeout: the wait was not its time
    assert not clock.waiting and clock.waited_s() >= 0.2


async def test_fifty_concurrent_trajectories_on_backends_of_two_slots_all_finish_on_their_own(
    fake_llm: FakeFactory,
) -> None:
    servers = [await fake_llm(always="hang", hang_s=0.005), await fake_llm(always="hang", hang_s=0.005)]
    arrivals: list[tuple[str, int]] = []
    grants: list[tuple[str, int, str]] = []
    async with fast_pool(*(s.url for s in servers), balancer={"max_in_flight": 2}) as pool:
        acquire = pool.balancer.acquire

        async def recorded(key: str | None = None, **kwargs: Any) -> Lease:
            assert key is not None
            turn = routes[key].turn
            arrivals.append((key, turn))
            lease = await acquire(key, **kwargs)
            grants.append((key, turn, lease.address))
            return lease

        pool.balancer.acquire = recorded  # type: ignore[method-assign]
        routes = {f"t{i:02d}": Route(key=f"t{i:02d}") for i in range(50)}

        async def trajectory(route: Route) -> None:
            for turn in range(3):
                route.turn = turn
                await pool.post_json("/v1/completions", BODY, route=route)

        await asyncio.gather(*(trajectory(r) for r in routes.values()))
        stats = pool.stats()

    assert len(grants) == 150  # nobody starved
    first_turns = [key for key, turn, _ in grants if turn == 0]
    assert first_turns == [key for key, turn in arrivals if turn == 0]  # first come, first served
    for key, route in routes.items():
        assert len({address for k, _, address in grants if k == key}) == 1  # sticky
        assert route.reroutes == []
    for server in servers:  # later turns wait in line for their own backend, in order
        mine = [(k, t) for k, t, address in grants if t > 0 and address == server.url]
        assert mine == [a for a in arrivals if a in set(mine)]
    assert stats.waited > 0 and stats.wakeups == stats.waited
