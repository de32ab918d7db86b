# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""A terminal process is started without forking the service, yet is what a shell needs: its
own session, the terminal as its controlling terminal (Ctrl-C reaches its foreground job), no
echo, the size asked for, and an exit status collected once."""

from __future__ import annotations

import os
import select
import sys
import threading
import time

import pytest

from nemo_gym_prorl.sandbox.terminal import TerminalProcess


def _read_until(fd: int, needle: bytes, timeout: float = 5.0) -> bytes:
    out, deadline = b"", time.monotonic() + timeout
    while needle not in out and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.1)
        if ready:
            try:
                out += os.read(fd, 4096)
            except OSError:
                break
    return out


def test_the_process_leads_its_own_session_on_its_controlling_terminal() -> None:
    proc = TerminalProcess.spawn(
        ["sh", "-c", "tty; echo sid=$(ps -o sid= $$) pid=$$; stty size; sleep 0.2"],
        cwd="/", env={"PATH": os.environ["PATH"]}, dimensions=(33, 111),
    )  # fmt: skip
    try:
        out = _read_until(proc.fd, b"33 111").decode()
        assert "/dev/pts/" in out and "not a tty" not in out
        sid = out.split("sid=")[1].split()[0]
        assert sid == str(proc.pid), "the command itself leads the session (setsid execs it, no fork)"
        assert "33 111" in out
    finally:
        proc.close()
    assert proc.closed and not proc.isalive()


def test_ctrl_c_on_the_terminal_interrupts_the_foreground_job_and_the_status_is_collected() -> None:
    # The process that prints is the one that then waits: Ctrl-C cannot fall between the two
    # (a shell that gets it before its child starts waits for that child first).
    waiter = "import time; print('ready', flush=True); time.sleep(30)"
    proc = TerminalProcess.spawn([sys.executable, "-c", waiter], cwd="/", env={"PATH": os.environ["PATH"]})
    try:
        assert b"ready" in _read_until(proc.fd, b"ready")
        os.write(proc.fd, b"\x03")
        deadline = time.monotonic() + 5
        while proc.isalive() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not proc.isalive()
        assert proc.signalstatus == 2 or proc.exitstatus == 130
    finally:
        proc.close()


def test_what_is_typed_is_not_echoed_back() -> None:
    proc = TerminalProcess.spawn(
        ["sh", "-c", "read line; echo got-$line"], cwd="/", env={"PATH": os.environ["PATH"]}
    )
    try:
        os.write(proc.fd, b"secret\n")
        out = _read_until(proc.fd, b"got-secret")
        assert out.count(b"secret") == 1, out
    finally:
        proc.close()


def test_close_kills_a_process_that_still_runs() -> None:
    proc = TerminalProcess.spawn(["sleep", "30"], cwd="/", env={"PATH": os.environ["PATH"]})
    proc.close()
    assert not proc.isalive() and proc.signalstatus is not None
    proc.close()  # idempotent


def test_closed_from_many_threads_at_once_its_descriptor_is_closed_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    proc = TerminalProcess.spawn(["sleep", "30"], cwd="/", env={"PATH": os.environ["PATH"]})
    fd, closes, real_close = proc.fd, [], os.close
    start = threading.Barrier(8)

    def counting_close(number: int) -> None:
        if number == fd:
            closes.append(number)
            time.sleep(0.01)  # widen the window a second close would slip through
        real_close(number)

    monkeypatch.setattr(os, "close", counting_close)
    threads = [threading.Thread(target=lambda: (start.wait(), proc.close())) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert closes == [fd], "a second close would take the number's next owner"
    assert not proc.isalive()
