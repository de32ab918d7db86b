# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Round-trip measurements of shell tool designs, side by side, for `prorl bench tools`.

Every method runs the same command (`echo hi`) and counts a round trip as done only when it
has seen the command's completion marker and checked the output, so the figures compare the
designs rather than shortcuts. Each function returns per-call latencies in milliseconds.

- `pty_roundtrips`: our PtyShell (prompt marker) in a bubblewrap sandbox.
- `ipython_roundtrips`: `1+1` on our IPython kernel in a bubblewrap sandbox.
- `tmux_roundtrips`: bash in tmux driven by `send-keys`, completion signalled with tmux's own
  `wait-for` channel (tmux at its best: no polling, no sleep), or detected by `capture-pane` in a
  tight loop with a numbered prompt as the marker.
- `subprocess_roundtrips`: a fresh `bash -c 'echo hi'` per command (completion = exit).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import time
from collections.abc import Awaitable, Callable
from typing import Literal

from nemo_gym_prorl.sandbox import SandboxSpec, open_sandbox
from nemo_gym_prorl.tools.ipython_kernel import ExecutionResult, IPythonKernel
from nemo_gym_prorl.tools.pty_shell import PtyShell, ShellResult

_WARMUP = 5
TmuxMode = Literal["wait_for", "capture"]


class BenchError(RuntimeError):
    """A measurement could not run or saw wrong output."""


def _timed(n: int, once: Callable[[], None]) -> list[float]:
    for _ in range(_WARMUP):
        once()
    out = []
    for _ in range(n):
        start = time.perf_counter()
        once()
        out.append((time.perf_counter() - start) * 1000.0)
    return out


async def _timed_async[T](
    n: int, call: Callable[[], Awaitable[T]], check: Callable[[T], None]
) -> list[float]:
    """Milliseconds of `n` awaited calls after the warm-up; every answer, warm-up included, is
    checked (outside the timed span)."""
    times: list[float] = []
    for i in range(_WARMUP + n):
        start = time.perf_counter()
        result = await call()
        elapsed = (time.perf_counter() - start) * 1000.0
        check(result)
        if i >= _WARMUP:
            times.append(elapsed)
    return times


async def pty_roundtrips(n: int, spec: SandboxSpec | None = None) -> list[float]:
    """`echo hi` through a PtyShell inside a (bubblewrap by default) sandbox."""

    def check(result: ShellResult) -> None:
        if result.output != "hi\n" or result.exit_code != 0:
            raise BenchError(f"pty shell returned {result!r}")

    with open_sandbox(spec or SandboxSpec(backend="bubblewrap")) as sandbox:
        async with PtyShell(sandbox, timeout=30.0) as shell:
            return await _timed_async(n, lambda: shell.run("echo hi"), check)


async def ipython_roundtrips(n: int, spec: SandboxSpec | None = None) -> list[float]:
    """`1+1` on an IPython kernel inside a (bubblewrap by default) sandbox."""

    def check(result: ExecutionResult) -> None:
        if result.result != "2":
            raise BenchError(f"ipython returned {result!r}")

    with open_sandbox(spec or SandboxSpec(backend="bubblewrap")) as sandbox:
        async with IPythonKernel(sandbox, timeout=30.0) as kernel:
            return await _timed_async(n, lambda: kernel.execute("1+1"), check)


def tmux_roundtrips(n: int, mode: TmuxMode = "wait_for") -> list[float]:
    """`echo hi` in bash under tmux, `send-keys` then completion detected by `mode`:
      - "wait_for": tmux at its best: the command line ends with `tmux wait-for -S <channel>`
        and the driver blocks in `tmux wait-for <channel>` (no polling, no sleep), then reads the
        output once with `capture-pane`;
      - "capture": `capture-pane` in a tight loop until the next numbered prompt follows `hi`.

    Runs on a private tmux server (`-L prorl-bench-<pid>`) and kills only that server."""
    if mode not in ("wait_for", "capture"):
        raise ValueError(f"tmux mode must be 'wait_for' or 'capture', not {mode!r}")
    tmux = shutil.which("tmux")
    if tmux is None:
        raise BenchError("tmux is not installed ('apt-get install tmux')")
    socket = f"prorl-bench-{os.getpid()}"
    base = [tmux, "-L", socket, "-f", "/dev/null"]

    def tmux_cmd(*args: str) -> str:
        done = subprocess.run([*base, *args], capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise BenchError(f"tmux {args[0]} failed: {done.stderr.strip()}")
        return done.stdout

    # `\#` is bash's command number: each completed command shows a new, distinct prompt.
    shell = "PS1='__P\\#__ ' HISTFILE= exec bash --noprofile --norc"
    subprocess.run(
        [*base, "new-session", "-d", "-s", "bench", "-x", "200", "-y", "50", shell],
        check=True,
        capture_output=True,
    )
    try:
        state = {"prompt": _wait_prompt(tmux_cmd, None, timeout=10.0)}

        def once_capture() -> None:
            tmux_cmd("send-keys", "-t", "bench", "echo hi", "Enter")
            state["prompt"] = _wait_prompt(tmux_cmd, state["prompt"], timeout=30.0)

        def once_wait_for() -> None:
            # The shell inside inherits $TMUX, so its `tmux wait-for -S` reaches this server; a
            # signal sent before the driver waits is remembered by tmux, so there is no race.
            tmux_cmd("send-keys", "-t", "bench", "echo hi; tmux wait-for -S prorl-done", "Enter")
            tmux_cmd("wait-for", "prorl-done")
            lines = tmux_cmd("capture-pane", "-p", "-t", "bench").rstrip("\n").split("\n")
            sent = max(
                i for i, line in enumerate(lines) if line.endswith("echo hi; tmux wait-for -S prorl-done")
            )
            if sent + 1 >= len(lines) or lines[sent + 1] != "hi":
                raise BenchError(f"tmux pane does not show the output: {lines[-5:]!r}")

        return _timed(n, once_wait_for if mode == "wait_for" else once_capture)
    finally:
        subprocess.run([*base, "kill-server"], capture_output=True, check=False)
        # kill-server leaves the socket file behind; it is ours (named after our pid).
        tmp = os.environ.get("TMUX_TMPDIR") or "/tmp"
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(tmp, f"tmux-{os.getuid()}", socket))


_PROMPT = re.compile(r"^__P(\d+)__ ?(.*)$")


def _wait_prompt(tmux_cmd: Callable[..., str], after: int | None, *, timeout: float) -> int:
    """Capture the pane in a loop until its last prompt is numbered above `after`, right after
    the line `hi` (the command's output): the same completion rule as the PTY shell's marker."""
    deadline = time.monotonic() + timeout
    pane = ""
    while time.monotonic() < deadline:
        pane = tmux_cmd("capture-pane", "-p", "-t", "bench")
        lines = pane.rstrip("\n").split("\n")
        last = _PROMPT.match(lines[-1])
        if last and last.group(2) == "":
            number = int(last.group(1))
            if after is None or (number > after and len(lines) > 1 and lines[-2] == "hi"):
                return number
    raise BenchError(f"tmux pane never showed the next prompt; last capture: {pane[-300:]!r}")


def subprocess_roundtrips(n: int) -> list[float]:
    """A fresh `bash -c 'echo hi'` per command."""
    bash = shutil.which("bash") or "/bin/bash"

    def once() -> None:
        done = subprocess.run([bash, "-c", "echo hi"], capture_output=True, check=False)
        if done.stdout != b"hi\n":
            raise BenchError(f"subprocess returned {done!r}")

    return _timed(n, once)
