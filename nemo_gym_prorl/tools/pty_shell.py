# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""A persistent bash on a pseudo-terminal inside a sandbox: the agent's `bash` tool.

Why a PTY and a prompt marker rather than tmux or a process per command: one round trip is a
write and a read on a file descriptor (tens of microseconds), while environment variables, the
working directory, functions and background jobs persist like in a real terminal. How a command is sent and how its end is seen is the
terminal protocol of `shell_protocol`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Self

from nemo_gym_prorl.sandbox.base import Sandbox, SandboxError
from nemo_gym_prorl.sandbox.output import CappedBuffer
from nemo_gym_prorl.sandbox.terminal import TerminalProcess
from nemo_gym_prorl.sandbox.threads import in_sandbox_thread
from nemo_gym_prorl.tools.shell_protocol import (
    Exited,
    MarkerScanner,
    Prompt,
    ShellBusyError,
    ShellError,
    ShellResult,
    encode_command,
    foreground_job,
    foreground_reads_terminal,
    recovery_hint,
    render_terminal_text,
    restart_hint,
    set_terminal_mode,
    timeout_hint,
    to_bytes,
    waiting_for_terminal_input,
)
from nemo_gym_prorl.tools.start_slots import StartSlots, limit_from_env

__all__ = ["PtyShell", "ShellBusyError", "ShellError", "ShellResult", "encode_command"]

_READ_CHUNK = 65536
_MAX_READS_PER_WAKEUP = 16  # drain a flood in bigger gulps without starving the event loop
# Shells starting at once, per event loop: a start is a sandbox's bash process and its first
# prompt, a few tens of milliseconds of CPU; a thousand at once took longer than their timeout.
start_slots = StartSlots(limit_from_env("PRORL_SHELL_STARTS", per_core=8))


class PtyShell:
    """One persistent bash inside `sandbox`, one command at a time.

    `run()` never raises for what the command does (failure, timeout, `exit`, hang): those come
    back in the `ShellResult`. It raises `ShellBusyError` when a command is already running and
    `ShellError` when the shell is closed or cannot be started.
    """

    def __init__(
        self,
        sandbox: Sandbox,
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float = 120.0,
        no_output_timeout: float | None = 60.0,
        input_wait_s: float | None = 3.0,
        max_output_bytes: int | None = None,
        interrupt_grace_s: float = 2.0,
        start_timeout: float = 20.0,
        dimensions: tuple[int, int] = (50, 200),
    ) -> None:
        self.sandbox = sandbox
        self.default_timeout = timeout
        self.default_no_output_timeout = no_output_timeout
        # A command silent this long while blocked reading the terminal is waiting for keys
        # nobody presses (`cat`, `uniq`, `python` typed bare): it is stopped then, whatever its
        # time limits say. None: only the limits stop it.
        self.input_wait_s = input_wait_s
        self.max_output_bytes = max_output_bytes or sandbox.spec.limits.max_output_bytes
        self.interrupt_grace_s = interrupt_grace_s
        self.start_timeout = start_timeout
        self.dimensions = dimensions
        self._initial_cwd = cwd or sandbox.spec.workspace_mount
        self._user_env = dict(env or {})
        self._token = secrets.token_hex(8)  # makes this shell's markers its own
        self._markers = MarkerScanner(self._token)
        self._proc: TerminalProcess | None = None
        self._fd = -1
        self._shell_pgrp: int | None = None
        self._buf = CappedBuffer(self.max_output_bytes)
        self._event: asyncio.Future[Prompt | Exited] | None = None
        self._started = asyncio.Event()
        # A run's prompt counts only after its own start marker: a prompt before it is a stray
        # one (bash redrawing its prompt for a Ctrl-C that reached it after the command it
        # meant to stop had already ended), and would end the next command before it ran.
        self._event_needs_start = False
        self._last_output = 0.0
        self._cwd = self._initial_cwd
        self._busy = False
        self._needs_recovery = False  # a run() was cancelled: the terminal may not be at a prompt
        self._closed = False
        self._restarts = 0
        self._eof_task: asyncio.Task[None] | None = None

    # -- public state ---------------------------------------------------------------------------
    @property
    def cwd(self) -> str:
        return self._cwd

    @property
    def running(self) -> bool:
        return self._busy

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.isalive()

    @property
    def restarts(self) -> int:
        return self._restarts

    # -- lifecycle ------------------------------------------------------------------------------
    async def start(self) -> None:
        """Start bash and wait for its first prompt (idempotent)."""
        if self._closed:
            raise ShellError("the shell is closed")
        if self._proc is not None and self._proc.isalive():
            return
        await self._spawn(self._cwd)

    async def _respawn(self) -> None:
        """A new shell where the old one was, or at the start directory if that is gone."""
        self._restarts += 1
        try:
            await self._spawn(self._cwd)
        except (ShellError, SandboxError):
            self._cwd = self._initial_cwd
            await self._spawn(self._cwd)

    async def _spawn(self, cwd: str) -> None:
        async with start_slots():
            await self._spawn_now(cwd)

    async def _spawn_now(self, cwd: str) -> None:
        await self._ateardown_process()
        loop = asyncio.get_running_loop()
        # --noediting: no readline (a tab in a heredoc must not trigger completion);
        # +H: no history expansion of `!`.
        proc = await self.sandbox.spawn_pty(
            ["bash", "--noprofile", "--norc", "--noediting", "+H"],
            cwd=cwd,
            env={**self._markers.shell_env(), **self._user_env},
            dimensions=self.dimensions,
        )
        self._proc, self._fd = proc, proc.fd
        os.set_blocking(self._fd, False)
        set_terminal_mode(self._fd)
        self._markers.reset()
        self._buf = CappedBuffer(self.max_output_bytes)
        self._event, self._event_needs_start = loop.create_future(), False
        loop.add_reader(self._fd, self._on_readable)
        try:
            first = await asyncio.wait_for(asyncio.shield(self._event), self.start_timeout)
        except TimeoutError:
            text = self._buf.text()
            await self._ateardown_process()
            raise ShellError(
                f"bash did not show a prompt within {self.start_timeout:.0f}s: {text[-500:]!r}"
            ) from None
        if isinstance(first, Exited):
            text = self._buf.text()
            await self._ateardown_process()
            raise ShellError(f"bash exited at start-up (status {first.exit_code}): {text[-500:]!r}")
        self._cwd = first.cwd
        # At a prompt, the terminal's foreground group is bash's own: remember it so recovery
        # never kills the shell when it means to kill a stuck job.
        with contextlib.suppress(OSError):
            self._shell_pgrp = os.tcgetpgrp(self._fd)
        self._buf = CappedBuffer(self.max_output_bytes)  # drop start-up noise

    def _detach(self) -> TerminalProcess | None:
        """Stop reading the terminal and forget the process; returns it for the caller to end.

        A reaper still polling it is cancelled: two threads asking whether one child
        is alive race on its exit status, and the loser raises."""
        if self._fd >= 0:
            with contextlib.suppress(Exception):
                asyncio.get_running_loop().remove_reader(self._fd)
        if self._eof_task is not None and not self._eof_task.done():
            self._eof_task.cancel()
        proc, self._proc, self._fd, self._shell_pgrp = self._proc, None, -1, None
        return proc

    def _teardown_process(self) -> None:
        if (proc := self._detach()) is not None:
            self.sandbox.kill_process(proc)  # its whole process group, then closes the fd

    async def _ateardown_process(self) -> None:
        """`_teardown_process` off the event loop: a terminal's close waits for the exit status
        (up to a second while the child lingers), so the group is killed here at once and the
        terminal is closed in a thread."""
        if (proc := self._detach()) is None:
            return
        _kill_group(proc)
        await in_sandbox_thread(self.sandbox.kill_process, proc)

    def _close_state(self) -> bool:
        """Mark the shell closed and fail a pending run(); False if it was closed already."""
        if self._closed:
            return False
        self._closed = True
        if self._event is not None and not self._event.done():
            self._event.set_exception(ShellError("the shell was closed while a command was running"))
            self._event.exception()  # mark retrieved: nobody may be awaiting it
        return True

    def close(self) -> None:
        """Kill the shell and everything it started. Idempotent; a pending run() gets an error.
        Blocks for a moment (the terminal's close): async code uses `aclose()`."""
        if self._close_state():
            self._teardown_process()

    async def aclose(self) -> None:
        """`close()` without blocking the event loop: the shell's process group dies at once,
        the terminal closes in a thread."""
        if self._close_state():
            await self._ateardown_process()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- reading the terminal ------------------------------------------------------------------
    def _on_readable(self) -> None:
        for _ in range(_MAX_READS_PER_WAKEUP):
            try:
                data = os.read(self._fd, _READ_CHUNK)
            except BlockingIOError:
                return
            except OSError:  # EIO: every process holding the terminal is gone
                data = b""
            if not data:
                self._on_eof()
                return
            self._last_output = time.monotonic()
            self._scan(data)

    def _scan(self, data: bytes) -> None:
        self._markers.scan(data, self._buf.write, self._started.set, self._on_event)

    @property
    def _pending(self) -> bytes:
        """What the scanner holds back as a possible start of a marker."""
        return self._markers.pending

    def _on_eof(self) -> None:
        loop = asyncio.get_running_loop()
        with contextlib.suppress(Exception):
            loop.remove_reader(self._fd)
        self._buf.write(self._markers.flush())
        if self._eof_task is None or self._eof_task.done():
            self._eof_task = loop.create_task(self._reap(self._proc))

    async def _reap(self, proc: TerminalProcess | None) -> None:
        """Collect bash's exit status. The terminal closes a moment before the process can be
        reaped; and a process that merely closed its terminal is useless, so it is killed."""
        status: int | None = None
        if proc is not None:
            for _ in range(200):
                if not proc.isalive():
                    status = proc.exitstatus if proc.exitstatus is not None else proc.signalstatus
                    break
                await asyncio.sleep(0.005)
            else:
                # Only the signal here: the terminal is closed (in a thread) when the shell is
                # respawned or closed, which detaches this process first.
                _kill_group(proc)
        if proc is self._proc:
            self._on_event(Exited(exit_code=status))

    def _on_event(self, event: Prompt | Exited) -> None:
        if isinstance(event, Prompt):
            self._cwd = event.cwd
            if self._event_needs_start and not self._started.is_set():
                return
        if self._event is not None and not self._event.done():
            self._event.set_result(event)
        # A prompt nobody waits for (a second one after Ctrl-C) needs no answer.

    def _take_output(self) -> CappedBuffer:
        buf, self._buf = self._buf, CappedBuffer(self.max_output_bytes)
        return buf

    # -- writing --------------------------------------------------------------------------------
    async def _write(self, data: bytes, deadline: float | None = None) -> None:
        """Write all of `data`; the terminal's input queue is small (4 KiB), so a long command
        is fed as bash reads it."""
        loop = asyncio.get_running_loop()
        view = memoryview(data)
        while view:
            try:
                written = os.write(self._fd, view)
                view = view[written:]
                continue
            except BlockingIOError:
                pass
            except OSError as exc:  # the terminal is gone; the reader reports the exit
                raise ShellError(f"cannot write to the shell: {exc}") from exc
            ready = loop.create_future()
            loop.add_writer(self._fd, ready.set_result, None)
            try:
                remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
                await asyncio.wait_for(ready, remaining)
            finally:
                loop.remove_writer(self._fd)

    async def send_input(self, text: str, *, timeout: float = 10.0) -> None:
        """Type `text` into the running command (e.g. answer a prompt: `"yes\\n"`).

        Waits until bash has started the command: typed any earlier, bash could read the text
        as part of its own input instead of the command reading it."""
        if not self._busy:
            await asyncio.sleep(0)  # a run() task created just now gets to start first
        if not self._busy or self._proc is None:
            raise ShellError("no command is running: send_input() answers a running command; use run()")
        try:
            await asyncio.wait_for(self._started.wait(), timeout)
        except TimeoutError:
            raise ShellError(f"the command did not start within {timeout:g}s; input not sent") from None
        await self._write(to_bytes(text), time.monotonic() + timeout)

    async def interrupt(self) -> None:
        """Send Ctrl-C to the running command (its run() returns once the prompt is back)."""
        if self._proc is not None and self._fd >= 0:
            with contextlib.suppress(OSError):
                os.write(self._fd, b"\x03")

    # -- running commands ------------------------------------------------------------------------
    async def run(
        self, command: str, *, timeout: float | None = None, no_output_timeout: float | None = None
    ) -> ShellResult:
        """Run one command to completion (or timeout) and return its output and exit code.

        `timeout` is a hard limit on the whole command; `no_output_timeout` ends it early when
        it prints nothing for that long (a command waiting for input, a hang). Either way the
        partial output comes back with exit code -1 and a hint, the command is interrupted and
        the shell is made usable again (Ctrl-C, then killing the stuck job, then a new shell).
        """
        if self._closed:
            raise ShellError("the shell is closed")
        if self._busy:
            raise ShellBusyError(
                "a command is already running in this shell; wait for it to finish "
                "(one command at a time per shell)"
            )
        self._busy = True
        try:
            return await self._run(command, timeout, no_output_timeout)
        except asyncio.CancelledError:
            # The caller gave up: stop the command, and make the next run() check the prompt.
            self._needs_recovery = True
            await self.interrupt()
            raise
        finally:
            self._busy = False

    async def _run(self, command: str, timeout: float | None, no_output_timeout: float | None) -> ShellResult:
        started = time.monotonic()
        hard = self.default_timeout if timeout is None else timeout
        quiet = self.default_no_output_timeout if no_output_timeout is None else no_output_timeout
        notes: list[str] = []
        restarted = False
        if self._proc is None or not self._proc.isalive():
            if self._proc is None:
                await self._spawn(self._cwd)
            else:
                await self._respawn()
                notes.append(restart_hint("dead", self._cwd))
                restarted = True
        elif self._needs_recovery:
            outcome = await self._recover(self.interrupt_grace_s)
            if outcome == "restarted":
                restarted = True
                notes.append(restart_hint("stuck", self._cwd))
        self._needs_recovery = False
        # Output that arrived since the last prompt (a background job) stays in the buffer and
        # is shown with this command's output, as a terminal would show it.
        set_terminal_mode(self._fd)

        loop = asyncio.get_running_loop()
        event: asyncio.Future[Prompt | Exited] = loop.create_future()
        self._started.clear()
        self._event, self._event_needs_start = event, True
        self._last_output = time.monotonic()
        deadline = started + hard
        timed_out_kind: str | None = None
        try:
            await self._write(encode_command(command), deadline)
        except TimeoutError:
            timed_out_kind = "hard"
        except ShellError:
            pass  # the shell died under us; the reader delivers the exit event

        while timed_out_kind is None and not event.done():
            now = time.monotonic()
            wait = deadline - now
            if quiet is not None:
                wait = min(wait, self._last_output + quiet - now)
            if wait <= 0:
                timed_out_kind = self._timeout_unless_done("hard" if now >= deadline else "quiet")
                if timed_out_kind is None:
                    continue
                break
            if (
                self.input_wait_s is not None
                and now - self._last_output >= self.input_wait_s
                and waiting_for_terminal_input(self._fd)
            ):
                # bash itself back at its prompt reads the terminal too: the prompt marker it
                # printed first may still be unread here, behind a busy event loop.
                timed_out_kind = self._timeout_unless_done("input")
                if timed_out_kind is None:
                    continue
                break
            # Wake at least every 0.5 s: a shell whose terminal is held open by an orphan
            # (local_unsafe has no pid namespace) can die without the terminal closing.
            await asyncio.wait({event}, timeout=min(wait, 0.5))
            if not event.done() and self._proc is not None and not self._proc.isalive():
                self._on_eof()

        if timed_out_kind is not None:
            return await self._timed_out(timed_out_kind, hard, quiet, started, notes, restarted)

        outcome = event.result()
        buf = self._take_output()
        if isinstance(outcome, Exited):
            code = outcome.exit_code if outcome.exit_code is not None else -1
            await self._respawn()
            notes.append(restart_hint("exited", self._cwd, code))
            return self._result(buf, code, started, restarted=True, notes=notes)
        return self._result(buf, outcome.exit_code, started, restarted=restarted, notes=notes)

    def _timeout_unless_done(self, kind: str) -> str | None:
        """`kind`, unless the terminal holds unread output: read it first, so a command that ended
        (its prompt marker waiting in the terminal) or printed meanwhile is not stopped."""
        before = self._last_output
        if self._fd >= 0:
            self._on_readable()
        if self._event is not None and self._event.done():
            return None
        if kind != "hard" and self._last_output != before:
            return None  # it printed: no longer quiet, nor waiting for input
        return kind

    async def _timed_out(
        self, kind: str, hard: float, quiet: float | None, started: float, notes: list[str], restarted: bool
    ) -> ShellResult:
        notes.append(timeout_hint(kind, hard, quiet))
        outcome = await self._recover(self.interrupt_grace_s)
        buf = self._take_output()
        restarted = restarted or outcome == "restarted"
        notes.append(recovery_hint(outcome, self._cwd))
        return self._result(buf, -1, started, restarted=restarted, notes=notes, timed_out=True)

    async def _recover(self, grace: float) -> str:
        """Bring the shell back to a prompt: Ctrl-C, else kill the terminal's foreground job,
        else a new shell. Returns "interrupted", "killed" or "restarted"."""
        if self._proc is not None and self._proc.isalive():
            if await self._back_at_prompt_after(self.interrupt, grace) and await self._in_step(grace):
                return "interrupted"
            fg = foreground_job(self._fd, self._shell_pgrp)
            if fg is not None:
                # The terminal's foreground group other than bash's own is a job of this shell:
                # a process we started, inside this sandbox.
                async def kill_job() -> None:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.killpg(fg, signal.SIGKILL)

                if await self._back_at_prompt_after(kill_job, grace) and await self._in_step(grace):
                    return "killed"
        # A new shell starts with an empty buffer; what the stuck command printed still belongs
        # to this result.
        salvaged = self._take_output()
        await self._respawn()
        self._buf = salvaged
        return "restarted"

    async def _back_at_prompt_after(self, action: Callable[[], Awaitable[None]], grace: float) -> bool:
        """Do `action`, then wait up to `grace` for bash to be back at its prompt: a prompt
        marker, and bash itself in the foreground reading the terminal. A marker alone is not
        enough: one that is not this recovery's (a late one from earlier) must not report a shell
        still spinning in a command as ready."""
        event: asyncio.Future[Prompt | Exited] = asyncio.get_running_loop().create_future()
        self._event, self._event_needs_start = event, False
        await action()
        await asyncio.wait({event}, timeout=grace)
        if not (event.done() and isinstance(event.result(), Prompt)):
            return False
        settle_by = time.monotonic() + grace
        while foreground_reads_terminal(self._fd, self._shell_pgrp) is False:
            if time.monotonic() >= settle_by:
                return False
            await asyncio.sleep(0.01)
        return True  # reading the terminal, or unknowable here: the marker is all there is

    async def _in_step(self, grace: float, tries: int = 3) -> bool:
        """Run a no-op and see it end cleanly before the next command is typed.

        Recovery sends Ctrl-C, and a prompt alone does not prove none is still on its way: a
        Ctrl-C that reached bash while it drew that prompt interrupts the next line it reads,
        after its first bytes. bash then drops those bytes and runs the line's tail (`val
        $'...'`, "command not found"). Sacrificing a `:` to it keeps the caller's command whole.
        A probe that ends garbled is tried again (bash read all of it, nothing else is queued);
        one that does not end in time is not (it may still run), and the shell is restarted."""
        kept = self._take_output()  # the interrupted command's output belongs to its caller
        loop = asyncio.get_running_loop()
        try:
            for _ in range(tries):
                probe: asyncio.Future[Prompt | Exited] = loop.create_future()
                self._started.clear()
                self._event, self._event_needs_start = probe, True
                try:
                    await self._write(encode_command(":"), time.monotonic() + grace)
                except (TimeoutError, ShellError):
                    return False
                await asyncio.wait({probe}, timeout=grace)
                if not probe.done() or not isinstance(outcome := probe.result(), Prompt):
                    return False
                if outcome.exit_code == 0:
                    return True
            return False
        finally:
            self._buf = kept

    def _result(
        self,
        buf: CappedBuffer,
        exit_code: int,
        started: float,
        *,
        restarted: bool,
        notes: list[str],
        timed_out: bool = False,
    ) -> ShellResult:
        return ShellResult(
            output=render_terminal_text(buf.text()),
            exit_code=exit_code,
            cwd=self._cwd,
            timed_out=timed_out,
            truncated=buf.truncated,
            restarted=restarted,
            hint=" ".join(notes) or None,
            duration_s=time.monotonic() - started,
        )


def _kill_group(proc: TerminalProcess) -> None:
    """SIGKILL the process group of a shell not reaped yet (until then its pid, and so its group
    id, cannot belong to anyone else). Never blocks."""
    with contextlib.suppress(Exception):
        if proc.isalive():
            os.killpg(proc.pid, signal.SIGKILL)
