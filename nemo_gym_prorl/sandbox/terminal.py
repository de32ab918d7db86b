# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""A process on a pseudo-terminal of its own, started without fork().

ptyprocess (like `pty.fork`) forks the whole service, then runs Python in the child until it
execs. The fork copies the page tables of a process of hundreds of MiB and dozens of threads
while it holds the GIL: measured at 256 concurrent rollouts, those forks held the GIL for a
quarter of the time, and every rollout on the event loop waited behind them. Here the child
is started as subprocess starts any child (vfork, then exec straight away) with the terminal's
other end as its stdin, stdout and stderr; util-linux `setsid --ctty` then gives it a session of
its own with that terminal as its controlling terminal (what job control and Ctrl-C need),
and execs the command.

The object answers what the shells ask of a terminal process: `pid`, `fd` (the service's end),
`isalive()`, `exitstatus`/`signalstatus`, `setwinsize()` and `close()`. Its exit status is
collected by its own `subprocess.Popen`, never by a bare `waitpid` that could race it.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import struct
import subprocess
import termios
import threading
from collections.abc import Mapping, Sequence

from nemo_gym_prorl.sandbox.identity import system_program


class TerminalError(RuntimeError):
    pass


@functools.cache
def _setsid() -> str:
    found = system_program("setsid")
    if found is None:
        raise TerminalError(
            "setsid (util-linux) is not installed: a terminal process needs it for its session"
        )
    return found


def _set_size(fd: int, rows: int, cols: int) -> None:
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


class TerminalProcess:
    def __init__(self, popen: subprocess.Popen[bytes], fd: int) -> None:
        self._popen = popen
        self.fd = fd
        # A terminal may be closed by its shell's teardown and by its sandbox's close at once, in
        # two threads: its descriptor must be closed once, or the second close would take
        # whatever the number was reused for meanwhile (another sandbox's pipe, a socket).
        self._fd_lock = threading.Lock()
        self.pid = popen.pid

    @classmethod
    def spawn(
        cls,
        argv: Sequence[str],
        *,
        cwd: str,
        env: Mapping[str, str],
        dimensions: tuple[int, int] = (40, 200),
        echo: bool = False,
        pass_fds: Sequence[int] = (),
    ) -> TerminalProcess:
        master, slave = os.openpty()
        try:
            _set_size(slave, *dimensions)
            if not echo:  # what is typed is not shown back: the shells read only the output
                attrs = termios.tcgetattr(slave)
                attrs[3] &= ~termios.ECHO
                termios.tcsetattr(slave, termios.TCSANOW, attrs)
            popen = subprocess.Popen(
                [_setsid(), "--ctty", *argv],
                stdin=slave, stdout=slave, stderr=slave, cwd=cwd, env=dict(env),
                pass_fds=tuple(pass_fds), close_fds=True,
            )  # fmt: skip
        except BaseException:
            os.close(master)
            raise
        finally:
            os.close(slave)
        return cls(popen, master)

    @property
    def closed(self) -> bool:
        """The service's end of the terminal is closed."""
        return self.fd < 0

    def isalive(self) -> bool:
        return self._popen.poll() is None

    @property
    def exitstatus(self) -> int | None:
        code = self._popen.poll()
        return code if code is not None and code >= 0 else None

    @property
    def signalstatus(self) -> int | None:
        code = self._popen.poll()
        return -code if code is not None and code < 0 else None

    def setwinsize(self, rows: int, cols: int) -> None:
        _set_size(self.fd, rows, cols)

    def close(self, force: bool = True) -> None:
        """Close the service's end of the terminal (idempotent); with `force`, kill the process
        if it still runs, and collect its exit status (waiting at most a second)."""
        with self._fd_lock:
            fd, self.fd = self.fd, -1
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)
        if force and self._popen.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                self._popen.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._popen.wait(timeout=1.0)
