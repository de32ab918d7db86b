# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The clients' one retry policy: an error it retries is tried again after each of its pauses,
then raised; any other error, or a call that may not run twice, is raised at once; a deadline
ends the tries early. Sync and async read the same policy."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from nemo_gym_prorl.retry import TRANSPORT, RetryPolicy

POLICY = RetryPolicy(delays_s=(0.5, 1.0, 2.0), retry_on=(ConnectionError,))


class Failing:
    """Raises `error` on its first `fails` calls, then answers "ok"."""

    def __init__(self, error: Exception, fails: int = 99) -> None:
        self.error, self.fails, self.calls = error, fails, 0

    def __call__(self) -> str:
        self.calls += 1
        if self.calls <= self.fails:
            raise self.error
        return "ok"


def run(policy: RetryPolicy, call: Failing, *, retry: bool = True) -> str:
    for attempt in policy.attempts(retry=retry):
        with attempt:
            return call()
    raise AssertionError("unreachable")


async def run_async(policy: RetryPolicy, call: Failing, *, retry: bool = True) -> str:
    async for attempt in policy.attempts_async(retry=retry):
        with attempt:
            return call()
    raise AssertionError("unreachable")


@pytest.fixture
def slept(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The pauses taken, sync or async: each moves a stand-in clock on instead of waiting."""
    pauses: list[float] = []

    def pause(seconds: float) -> None:
        pauses.append(seconds)

    async def pause_async(seconds: float) -> None:
        pauses.append(seconds)

    monkeypatch.setattr(time, "sleep", pause)
    monkeypatch.setattr(asyncio, "sleep", pause_async)
    monkeypatch.setattr(time, "monotonic", lambda: 1000.0 + sum(pauses))
    return pauses


def test_a_call_that_keeps_failing_is_tried_after_each_pause_then_raises(slept: list[float]) -> None:
    call = Failing(ConnectionError("refused"))
    with pytest.raises(ConnectionError, match="refused"):
        run(POLICY, call)
    assert call.calls == POLICY.tries == 4
    assert slept == [0.5, 1.0, 2.0]


async def test_the_async_attempts_follow_the_same_policy(slept: list[float]) -> None:
    call = Failing(ConnectionError("refused"))
    with pytest.raises(ConnectionError, match="refused"):
        await run_async(POLICY, call)
    assert call.calls == 4 and slept == [0.5, 1.0, 2.0]
    recovering = Failing(ConnectionError("reset"), fails=1)
    assert await run_async(POLICY, recovering) == "ok"
    assert recovering.calls == 2 and slept[3:] == [0.5]


def test_a_call_that_recovers_returns_its_answer_after_the_pauses_it_needed(slept: list[float]) -> None:
    call = Failing(ConnectionError("reset"), fails=2)
    assert run(POLICY, call) == "ok"
    assert call.calls == 3 and slept == [0.5, 1.0]


def test_an_error_the_policy_does_not_retry_is_raised_at_once(slept: list[float]) -> None:
    call = Failing(ValueError("a bad answer"))
    with pytest.raises(ValueError, match="a bad answer"):
        run(POLICY, call)
    assert call.calls == 1 and slept == []


def test_a_call_that_may_not_run_twice_gets_one_try(slept: list[float]) -> None:
    call = Failing(ConnectionError("refused"))
    with pytest.raises(ConnectionError):
        run(POLICY, call, retry=False)
    assert call.calls == 1 and slept == []


def test_no_try_starts_past_the_deadline(slept: list[float]) -> None:
    policy = RetryPolicy(delays_s=(0.5, 1.0, 2.0), retry_on=(ConnectionError,), deadline_s=1.2)
    call = Failing(ConnectionError("refused"))
    with pytest.raises(ConnectionError):
        run(policy, call)
    assert call.calls == 2 and slept == [0.5]  # a third try would start 1.5 s after the first


def test_the_clients_policy_retries_a_lost_answer_about_15_s_in_all() -> None:
    assert sum(TRANSPORT.delays_s) == 15.5 and TRANSPORT.tries == 6
    assert TRANSPORT.pause_after(httpx.ReadError("reset"), 1, time.monotonic()) == 0.5
    assert TRANSPORT.pause_after(ValueError("an answer"), 1, time.monotonic()) is None
