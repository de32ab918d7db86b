# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""A sandbox's child process starts off the event loop and answers as asyncio's Process does:
streams both ways, its exit code however it ends, a session of its own, and nothing left over."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading

import pytest

from nemo_gym_prorl.sandbox import SandboxProcess
from nemo_gym_prorl.sandbox import process as process_module

ECHO_UPPER = "import sys\nfor line in sys.stdin: print(line.strip().upper(), flush=True)\nsys.exit(3)"


async def start(code: str, *, stdin: bool = False, stdout: int | None = subprocess.PIPE) -> SandboxProcess:
    return await SandboxProcess.start(
        [sys.executable, "-c", code],
        cwd="/",
        env={"PATH": os.environ["PATH"]},
        stdin=stdin,
        stdout=stdout,
        stderr=subprocess.PIPE,
    )


async def talk_to_an_echo() -> None:
    """An echo's answer through stdin and stdout, then its exit code once stdin closes."""
    proc = await start(ECHO_UPPER, stdin=True)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(b"hello\n")
    await proc.stdin.drain()
    assert await asyncio.wait_for(proc.stdout.readline(), 10) == b"HELLO\n"
    proc.stdin.close()
    assert await asyncio.wait_for(proc.wait(), 10) == 3
    assert proc.returncode == 3


async def test_it_talks_through_its_streams_and_reports_its_exit_code() -> None:
    await talk_to_an_echo()


async def test_stderr_is_read_to_its_end_and_a_devnull_stdout_gives_no_stream() -> None:
    proc = await start("import sys; sys.stderr.write('oops')", stdout=subprocess.DEVNULL)
    assert proc.stdout is None and proc.stderr is not None
    assert await asyncio.wait_for(proc.stderr.read(), 10) == b"oops"
    assert await asyncio.wait_for(proc.wait(), 10) == 0


async def test_a_killed_process_reports_the_signal_and_is_reaped() -> None:
    proc = await start("import time; time.sleep(60)")
    assert proc.returncode is None
    proc.kill()
    assert await asyncio.wait_for(proc.wait(), 10) == -9
    with pytest.raises(ChildProcessError):
        os.waitpid(proc.pid, os.WNOHANG)  # collected by its own Popen: no zombie left


async def test_it_starts_in_a_session_of_its_own_from_a_thread_not_the_event_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    started_in: list[threading.Thread] = []
    real_popen = process_module._popen

    def recording_popen(*args: object) -> object:
        started_in.append(threading.current_thread())
        return real_popen(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(process_module, "_popen", recording_popen)
    proc = await start("import time; time.sleep(60)")
    try:
        assert started_in and started_in[0] is not threading.main_thread()
        assert os.getsid(proc.pid) == proc.pid, "its process group is the unit a kill takes"
    finally:
        proc.kill()
        await proc.wait()


async def test_its_exit_is_seen_where_the_kernel_has_no_pidfd(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_pidfd(pid: int) -> int:
        raise OSError(38, "Function not implemented")

    monkeypatch.setattr(os, "pidfd_open", no_pidfd)
    proc = await start("raise SystemExit(7)")
    assert await asyncio.wait_for(proc.wait(), 10) == 7


def test_under_uvloop_it_talks_through_its_streams_and_closes_each_pipe_once() -> None:
    # uvloop (uvicorn's loop, so a NeMo Gym server's) closed a pipe's descriptor twice; a thread
    # that opened a descriptor in between (a sandbox thread's terminal) lost it to the second.
    uvloop = pytest.importorskip("uvloop")
    lost: list[OSError] = []
    stop = threading.Event()

    def open_check_close() -> None:
        while not stop.is_set():
            fds = [os.open(os.devnull, os.O_RDONLY) for _ in range(4)]
            for fd in fds:
                try:
                    os.fstat(fd)
                    os.close(fd)
                except OSError as exc:
                    lost.append(exc)

    async def run() -> None:
        await talk_to_an_echo()
        for _ in range(150):
            proc = await SandboxProcess.start(
                ["/bin/sh", "-c", "printf out; printf err >&2"], cwd="/", env={}, stdin=False,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            )  # fmt: skip
            assert proc.stdout is not None and proc.stderr is not None
            assert (await proc.stdout.read(), await proc.stderr.read()) == (b"out", b"err")
            assert await asyncio.wait_for(proc.wait(), 10) == 0

    threads = [threading.Thread(target=open_check_close) for _ in range(2)]
    for thread in threads:
        thread.start()
    try:
        uvloop.run(run())
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    assert not lost, f"{len(lost)} descriptors of another thread were closed under it: {lost[:3]}"
