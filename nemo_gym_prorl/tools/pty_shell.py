# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""A persistent bash on a pseudo-terminal inside a sandbox: the agent's `bash` tool.

Why a PTY and a prompt marker rather than tmux or a process per command: one round trip is a
write and a read on a file descriptor (tens of microseconds), while environment variables, the
working directory, functions and background jobs persist like in a real terminal.

How a command completes: bash runs `PROMPT_COMMAND` before every prompt; ours prints a marker
made unique per shell by a random token, carrying `$?` and `$PWD`. The marker is assembled by
`printf` from separate words, so the text of PROMPT_COMMAND itself (visible to `set`, `declare
-p`) never matches it. `PS0`, which bash prints after reading a command and before running it,
carries a second marker: the command has started, so input typed now goes to it, not to bash.

How a command is sent: as one line `eval $'...'`, the command ANSI-C quoted. That makes a
multi-line command (loops, heredocs) run as one unit with one marker, keeps a syntax error (an
unclosed quote) from leaving bash waiting for more lines, keeps `!` away from history expansion,
and leaves no raw control byte in the input that the terminal would act on (a literal Ctrl-C or
Ctrl-S inside a heredoc). The terminal is set to non-canonical mode so a long line is not cut at
the kernel's 4095-byte canonical line limit.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import secrets
import signal
import termios
import time
from collections.abc import Mapping
from typing import Self

import ptyprocess
from pydantic import BaseModel

from nemo_gym_prorl.sandbox.base import Sandbox, SandboxError
from nemo_gym_prorl.sandbox.output import CappedBuffer, strip_ansi

_READ_CHUNK = 65536
_MAX_READS_PER_WAKEUP = 16  # drain a flood in bigger gulps without starving the event loop
_CWD_MAX = 8192  # a marker longer than this cannot be ours (PATH_MAX is 4096)
_CR_NL = re.compile(r"\r+\n")


class ShellError(RuntimeError):
    """The shell could not do what was asked (closed, failed to start, nothing running)."""


class ShellBusyError(ShellError):
    """A second command was issued while one is still running in the same shell."""


class ShellResult(BaseModel):
    output: str
    exit_code: int  # -1 when the command timed out
    cwd: str  # the shell's working directory after the command (inside the sandbox)
    timed_out: bool = False
    truncated: bool = False
    restarted: bool = False  # the shell was replaced by a fresh one: env and state are gone
    hint: str | None = None  # what happened and what to do, for the model to read
    duration_s: float = 0.0


class _Prompt(BaseModel):
    """A prompt marker seen on the terminal: the previous command finished."""

    exit_code: int
    cwd: str


class _Exited(BaseModel):
    """The terminal closed: bash (and everything on the terminal) is gone."""

    exit_code: int | None


def _to_bytes(text: str) -> bytes:
    """UTF-8; escaped surrogates (undecodable bytes) go back to raw bytes, lone ones to '?'."""
    try:
        return text.encode("utf-8", errors="surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", errors="replace")


def encode_command(command: str) -> bytes:
    """`eval $'...'` with `command` ANSI-C quoted: one line of printable bytes (see module doc)."""
    out: list[str] = []
    for ch in command:
        if ch == "\\":
            out.append("\\\\")
        elif ch == "'":
            out.append("\\'")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\x00":
            continue  # bash strings cannot hold NUL; a real terminal drops it too
        elif ch == "!" or ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    return _to_bytes("eval $'" + "".join(out) + "'\n")


def _partial_prefix_len(data: bytearray, prefix: bytes) -> int:
    """Length of the longest tail of `data` that is a proper prefix of `prefix`."""
    for k in range(min(len(prefix) - 1, len(data)), 0, -1):
        if data.endswith(prefix[:k]):
            return k
    return 0


def render_terminal_text(text: str) -> str:
    """What a reader would see: escapes stripped, CRLF (and the pty's \\r\\r\\n) as \\n, and a
    line rewritten with carriage returns (progress bars) reduced to its last version."""
    text = _CR_NL.sub("\n", strip_ansi(text))
    if "\r" not in text:
        return text
    lines = []
    for line in text.split("\n"):
        if "\r" in line:
            parts = [p for p in line.split("\r") if p]
            line = parts[-1] if parts else ""
        lines.append(line)
    return "\n".join(lines)


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
        max_output_bytes: int | None = None,
        interrupt_grace_s: float = 2.0,
        start_timeout: float = 20.0,
        dimensions: tuple[int, int] = (50, 200),
    ) -> None:
        self.sandbox = sandbox
        self.default_timeout = timeout
        self.default_no_output_timeout = no_output_timeout
        self.max_output_bytes = max_output_bytes or sandbox.spec.limits.max_output_bytes
        self.interrupt_grace_s = interrupt_grace_s
        self.start_timeout = start_timeout
        self.dimensions = dimensions
        self._initial_cwd = cwd or sandbox.spec.workspace_mount
        self._user_env = dict(env or {})
        self._token = secrets.token_hex(8)
        self._marker_prefix = f"__PRORL_{self._token}__:".encode()
        self._marker_re = re.compile(
            re.escape(self._marker_prefix)
            + rb"(?:(-?\d+):(.*?):__END_"
            + self._token.encode()
            + rb"__|(S))\r*\n",
            re.DOTALL,
        )
        self._proc: ptyprocess.PtyProcess | None = None
        self._fd = -1
        self._shell_pgrp: int | None = None
        self._pending = bytearray()  # bytes not yet known to be output rather than a marker
        self._buf = CappedBuffer(self.max_output_bytes)
        self._event: asyncio.Future[_Prompt | _Exited] | None = None
        self._started = asyncio.Event()
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
    def _shell_env(self) -> dict[str, str]:
        printf = (
            f'printf "__%s_%s__:%d:%s:__END_%s__\\n" PRORL {self._token} "$?" "$PWD" {self._token}; '
            "export -n PS0 PS1 PROMPT_COMMAND"  # nested shells and programs do not inherit markers
        )
        return {
            "PS0": f"__PRORL\\137{self._token}__:S\\n",  # \137 is `_`: the value itself never matches
            "PS1": "",
            "PS2": "",
            "PROMPT_COMMAND": printf,
            "HISTFILE": "",  # nothing written into the workspace on exit
            "HISTSIZE": "0",  # and no unbounded in-memory history of big heredocs
            "PAGER": "cat",
            "GIT_PAGER": "cat",
            "SYSTEMD_PAGER": "",
            **self._user_env,
        }

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
        self._teardown_process()
        loop = asyncio.get_running_loop()
        # --noediting: no readline (a tab in a heredoc must not trigger completion);
        # +H: no history expansion of `!`.
        proc = self.sandbox.spawn_pty(
            ["bash", "--noprofile", "--norc", "--noediting", "+H"],
            cwd=cwd,
            env=self._shell_env(),
            dimensions=self.dimensions,
        )
        self._proc, self._fd = proc, proc.fd
        os.set_blocking(self._fd, False)
        self._set_terminal_mode()
        self._pending.clear()
        self._buf = CappedBuffer(self.max_output_bytes)
        self._event = loop.create_future()
        loop.add_reader(self._fd, self._on_readable)
        try:
            first = await asyncio.wait_for(asyncio.shield(self._event), self.start_timeout)
        except TimeoutError:
            text = self._buf.text()
            self._teardown_process()
            raise ShellError(
                f"bash did not show a prompt within {self.start_timeout:.0f}s: {text[-500:]!r}"
            ) from None
        if isinstance(first, _Exited):
            text = self._buf.text()
            self._teardown_process()
            raise ShellError(f"bash exited at start-up (status {first.exit_code}): {text[-500:]!r}")
        self._cwd = first.cwd
        # At a prompt, the terminal's foreground group is bash's own: remember it so recovery
        # never kills the shell when it means to kill a stuck job.
        with contextlib.suppress(OSError):
            self._shell_pgrp = os.tcgetpgrp(self._fd)
        self._buf = CappedBuffer(self.max_output_bytes)  # drop start-up noise

    def _set_terminal_mode(self) -> None:
        """No echo, non-canonical input (no 4095-byte line limit), signals on (Ctrl-C works).

        Set from our side of the pty (Linux applies a master's termios to the slave) and checked
        before every command: bash restores its own saved modes after a job dies of a signal.
        """
        try:
            attrs = termios.tcgetattr(self._fd)
        except termios.error:
            return
        lflag = attrs[3]
        wanted = (lflag & ~(termios.ECHO | termios.ICANON)) | termios.ISIG
        if wanted != lflag:
            attrs[3] = wanted
            attrs[6][termios.VMIN] = 1
            attrs[6][termios.VTIME] = 0
            with contextlib.suppress(termios.error):
                termios.tcsetattr(self._fd, termios.TCSANOW, attrs)

    def _teardown_process(self) -> None:
        if self._fd >= 0:
            with contextlib.suppress(Exception):
                asyncio.get_running_loop().remove_reader(self._fd)
        if self._proc is not None:
            self.sandbox.kill_process(self._proc)  # its whole process group, then closes the fd
        self._proc, self._fd, self._shell_pgrp = None, -1, None

    def close(self) -> None:
        """Kill the shell and everything it started. Idempotent; a pending run() gets an error."""
        if self._closed:
            return
        self._closed = True
        if self._event is not None and not self._event.done():
            self._event.set_exception(ShellError("the shell was closed while a command was running"))
            self._event.exception()  # mark retrieved: nobody may be awaiting it
        if self._eof_task is not None:
            self._eof_task.cancel()
        self._teardown_process()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

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
        """Split the stream into output and prompt markers, holding back only what could be
        the start of a marker, so a flood of output costs bounded memory."""
        pending = self._pending
        pending += data
        prefix = self._marker_prefix
        while pending:
            i = pending.find(prefix)
            if i < 0:
                # Hold back only a tail that could be the start of a marker: output that is
                # not must reach the buffer now (a timeout returns what is there).
                keep = _partial_prefix_len(pending, prefix)
                if len(pending) > keep:
                    self._buf.write(bytes(pending[: len(pending) - keep]))
                    del pending[: len(pending) - keep]
                return
            if i:
                self._buf.write(bytes(pending[:i]))
                del pending[:i]
            match = self._marker_re.match(pending)
            if match is None:
                if len(pending) > len(prefix) + _CWD_MAX:  # not a marker after all
                    self._buf.write(bytes(pending[: len(prefix)]))
                    del pending[: len(prefix)]
                    continue
                return  # the rest of the marker is still on its way
            if match.group(3):
                del pending[: match.end()]
                self._started.set()
                continue
            # Read the groups before deleting: a match on a bytearray sees later mutations.
            code, cwd = int(match.group(1)), match.group(2).decode("utf-8", errors="replace")
            del pending[: match.end()]
            self._on_event(_Prompt(exit_code=code, cwd=cwd))

    def _on_eof(self) -> None:
        loop = asyncio.get_running_loop()
        with contextlib.suppress(Exception):
            loop.remove_reader(self._fd)
        if self._pending:
            self._buf.write(bytes(self._pending))
            self._pending.clear()
        if self._eof_task is None or self._eof_task.done():
            self._eof_task = loop.create_task(self._reap(self._proc))

    async def _reap(self, proc: ptyprocess.PtyProcess | None) -> None:
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
                self.sandbox.kill_process(proc)
        if proc is self._proc:
            self._on_event(_Exited(exit_code=status))

    def _on_event(self, event: _Prompt | _Exited) -> None:
        if isinstance(event, _Prompt):
            self._cwd = event.cwd
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
        await self._write(_to_bytes(text), time.monotonic() + timeout)

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
                notes.append(
                    "The previous shell had exited; this command ran in a new shell "
                    f"started in {self._cwd} (environment variables and shell state were reset)."
                )
                restarted = True
        elif self._needs_recovery:
            outcome = await self._recover(self.interrupt_grace_s)
            if outcome == "restarted":
                restarted = True
                notes.append(
                    "The previous (cancelled) command could not be stopped; the shell was "
                    f"restarted in {self._cwd} (environment variables and shell state were reset)."
                )
        self._needs_recovery = False
        # Output that arrived since the last prompt (a background job) stays in the buffer and
        # is shown with this command's output, as a terminal would show it.
        self._set_terminal_mode()

        loop = asyncio.get_running_loop()
        event: asyncio.Future[_Prompt | _Exited] = loop.create_future()
        self._event = event
        self._started.clear()
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
                timed_out_kind = "hard" if now >= deadline else "quiet"
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
        if isinstance(outcome, _Exited):
            code = outcome.exit_code if outcome.exit_code is not None else -1
            await self._respawn()
            notes.append(
                f"The shell exited (status {code}). A new shell was started in {self._cwd}; "
                "environment variables, functions and background jobs of the old one are gone."
            )
            return self._result(buf, code, started, restarted=True, notes=notes)
        return self._result(buf, outcome.exit_code, started, restarted=restarted, notes=notes)

    async def _timed_out(
        self, kind: str, hard: float, quiet: float | None, started: float, notes: list[str], restarted: bool
    ) -> ShellResult:
        if kind == "hard":
            notes.append(f"The command timed out after {hard:g}s (hard limit).")
        else:
            notes.append(
                f"The command printed nothing for {quiet:g}s and was stopped. If it was waiting for "
                "input, pass the input non-interactively (e.g. `printf 'y\\n' | cmd` or a flag such as "
                "-y); if it is slow, run it in the background with output to a file "
                "(`cmd > out.log 2>&1 &`) and check on it."
            )
        outcome = await self._recover(self.interrupt_grace_s)
        buf = self._take_output()
        if outcome == "interrupted":
            notes.append("It was interrupted with Ctrl-C; the shell is ready, its state is kept.")
        elif outcome == "killed":
            notes.append(
                "It ignored Ctrl-C, so its process group was killed; the shell is ready, its state is kept."
            )
        else:
            restarted = True
            notes.append(
                f"The shell did not recover, so it was restarted in {self._cwd}; environment "
                "variables and shell state were reset."
            )
        return self._result(buf, -1, started, restarted=restarted, notes=notes, timed_out=True)

    async def _recover(self, grace: float) -> str:
        """Bring the shell back to a prompt: Ctrl-C, else kill the terminal's foreground job,
        else a new shell. Returns "interrupted", "killed" or "restarted"."""
        loop = asyncio.get_running_loop()
        if self._proc is not None and self._proc.isalive():
            event: asyncio.Future[_Prompt | _Exited] = loop.create_future()
            self._event = event
            await self.interrupt()
            await asyncio.wait({event}, timeout=grace)
            if event.done() and isinstance(event.result(), _Prompt):
                return "interrupted"
            if not event.done():
                fg = self._foreground_job()
                if fg is not None:
                    # The terminal's foreground group other than bash's own is a job of this
                    # shell: a process we started, inside this sandbox.
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.killpg(fg, signal.SIGKILL)
                    await asyncio.wait({event}, timeout=grace)
                    if event.done() and isinstance(event.result(), _Prompt):
                        return "killed"
        # A new shell starts with an empty buffer; what the stuck command printed still belongs
        # to this result.
        salvaged = self._take_output()
        await self._respawn()
        self._buf = salvaged
        return "restarted"

    def _foreground_job(self) -> int | None:
        try:
            fg = os.tcgetpgrp(self._fd)
        except OSError:
            return None
        if fg <= 0 or fg == self._shell_pgrp:
            return None
        return fg

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
