# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""`StopOnSignals`: the first SIGINT/SIGTERM stops the work once; later ones cannot cut the
shutdown short. Signals are sent to this process (pytest runs tests in the main thread)."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
from collections.abc import Iterator

import pytest

from nemo_gym_prorl.demo.shutdown import Interrupted, StopOnSignals


@pytest.fixture(autouse=True)
def restore_handlers() -> Iterator[None]:
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)


def send_later(sig: int, delay_s: float = 0.2) -> threading.Timer:
    """From another thread, while the main thread waits (as a Ctrl-C arrives)."""
    timer = threading.Timer(delay_s, os.kill, (os.getpid(), sig))
    timer.start()
    return timer


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_the_first_signal_raises_interrupted_with_the_shells_exit_code(
    sig: signal.Signals, code: int
) -> None:
    with StopOnSignals(), pytest.raises(Interrupted) as stop:
        signal.raise_signal(sig)
    assert stop.value.signum == sig and stop.value.name == sig.name and stop.value.exit_code == code


def test_sigint_inherited_as_ignored_still_stops_the_work_and_is_ignored_again_afterwards() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # as `cmd &` in a script starts a command
    with StopOnSignals(), pytest.raises(Interrupted):
        signal.raise_signal(signal.SIGINT)
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN


def test_later_signals_only_print_a_note(capfd: pytest.CaptureFixture[str]) -> None:
    with StopOnSignals("{signal}: already stopping") as signals:
        with pytest.raises(Interrupted):
            signal.raise_signal(signal.SIGINT)
        signal.raise_signal(signal.SIGINT)
        signal.raise_signal(signal.SIGTERM)
    assert signals.stop_name == "SIGINT"
    assert capfd.readouterr().err.splitlines() == ["SIGINT: already stopping", "SIGTERM: already stopping"]


def test_a_signal_cancels_the_running_coroutine_whose_cleanup_runs_before_interrupted() -> None:
    steps: list[str] = []

    async def work() -> None:
        try:
            steps.append("waiting")
            await asyncio.sleep(3600)  # the loop sits in select(): the signal must wake it
        except asyncio.CancelledError:
            steps.append("cancelled")
            raise
        finally:
            await asyncio.sleep(0)  # cleanup may still await
            steps.append("cleaned up")

    with StopOnSignals() as signals:
        send_later(signal.SIGINT)
        with pytest.raises(Interrupted) as stop:
            signals.run(work())
    assert stop.value.signum == signal.SIGINT
    assert steps == ["waiting", "cancelled", "cleaned up"]


def test_a_coroutine_that_finishes_despite_the_signal_still_ends_in_interrupted() -> None:
    async def shielded() -> str:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            return "finished anyway"
        return "not cancelled"

    with StopOnSignals() as signals:
        send_later(signal.SIGTERM)
        with pytest.raises(Interrupted) as stop:
            signals.run(shielded())
    assert stop.value.exit_code == 143


def test_run_returns_the_result_when_no_signal_comes() -> None:
    async def answer() -> int:
        return 42

    with StopOnSignals() as signals:
        assert signals.run(answer()) == 42
    assert signals.stop_name is None


def test_holding_defers_the_first_signal_to_the_end_of_the_block(capfd: pytest.CaptureFixture[str]) -> None:
    finished = False
    signals = StopOnSignals("{signal}: already stopping")
    with signals, pytest.raises(Interrupted) as stop, signals.holding():
        signal.raise_signal(signal.SIGTERM)
        signal.raise_signal(signal.SIGINT)
        finished = True
    assert finished and stop.value.signum == signal.SIGTERM
    assert capfd.readouterr().err.splitlines() == ["SIGTERM: already stopping", "SIGINT: already stopping"]


def test_holding_lets_its_own_exception_through() -> None:
    with StopOnSignals() as signals, pytest.raises(OSError, match="shutdown failed"), signals.holding():
        signal.raise_signal(signal.SIGINT)
        raise OSError("shutdown failed")


def test_previous_handlers_come_back_on_exit() -> None:
    def mine(signum: int, frame: object) -> None:
        pass

    signal.signal(signal.SIGTERM, mine)
    sigint_before = signal.getsignal(signal.SIGINT)
    with StopOnSignals():
        assert signal.getsignal(signal.SIGTERM) is not mine
    assert signal.getsignal(signal.SIGTERM) is mine
    assert signal.getsignal(signal.SIGINT) is sigint_before


def test_outside_the_main_thread_it_changes_nothing() -> None:
    seen: list[object] = []

    def worker() -> None:
        with StopOnSignals():
            seen.append(signal.getsignal(signal.SIGTERM))

    before = signal.getsignal(signal.SIGTERM)
    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    assert seen == [before]
