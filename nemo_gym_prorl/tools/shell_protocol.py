# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""What `PtyShell` and its bash say to each other over the terminal, with no I/O.

A command goes in as one line `eval $'...'` (`encode_command`); bash's output comes back mixed
with the markers its `PS0` and `PROMPT_COMMAND` print (`MarkerScanner.shell_env`), which
`MarkerScanner.scan` separates into output, "the command started" and "a prompt: the command
ended with this status in this directory". `render_terminal_text` turns the output into what a
reader of the terminal would see. The hints tell the model what a timeout did.

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

import contextlib
import os
import platform
import re
import termios
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from nemo_gym_prorl.sandbox.output import strip_ansi

_CWD_MAX = 8192  # a marker longer than this cannot be ours (PATH_MAX is 4096)
_CR_NL = re.compile(r"\r+\n")
# A marker, from its prefix (`__PRORL_<token>__:`) on: the exit code and cwd, closed by the same
# token, or `S` (a command started). One pattern for every shell: the end token must repeat the
# prefix's (a back-reference), where a pattern built per token would be compiled for each new
# shell (a millisecond of the event loop's time per rollout, at a thousand rollouts).
_MARKER_RE = re.compile(rb"__PRORL_([0-9a-f]+)__:(?:(-?\d+):(.*?):__END_\1__|(S))\r*\n", re.DOTALL)


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


class Prompt(BaseModel):
    """A prompt marker seen on the terminal: the previous command finished."""

    exit_code: int
    cwd: str


class Exited(BaseModel):
    """The terminal closed: bash (and everything on the terminal) is gone."""

    exit_code: int | None


def to_bytes(text: str) -> bytes:
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
    return to_bytes("eval $'" + "".join(out) + "'\n")


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


class MarkerScanner:
    """The markers of one shell (unique by a random token) and the scan of its output stream."""

    def __init__(self, token: str) -> None:
        if not re.fullmatch("[0-9a-f]+", token):
            raise ValueError(f"a shell's marker token is lowercase hex, not {token!r}")
        self._token = token
        self._prefix = f"__PRORL_{self._token}__:".encode()
        self._pending = bytearray()  # bytes not yet known to be output rather than a marker

    def shell_env(self) -> dict[str, str]:
        """bash's environment: the markers, no history file, no pager."""
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
        }

    @property
    def pending(self) -> bytes:
        return bytes(self._pending)

    def reset(self) -> None:
        """A new shell: nothing of the old one's stream is pending."""
        self._pending.clear()

    def flush(self) -> bytes:
        """The terminal closed: what was held back as a possible marker is output after all."""
        rest = bytes(self._pending)
        self._pending.clear()
        return rest

    def scan(
        self,
        data: bytes,
        output: Callable[[bytes], object],
        started: Callable[[], None],
        prompt: Callable[[Prompt], None],
    ) -> None:
        """Split the stream into output and prompt markers, holding back only what could be
        the start of a marker, so a flood of output costs bounded memory."""
        pending = self._pending
        pending += data
        prefix = self._prefix
        while pending:
            i = pending.find(prefix)
            if i < 0:
                # Hold back only a tail that could be the start of a marker: output that is
                # not must reach the buffer now (a timeout returns what is there).
                keep = _partial_prefix_len(pending, prefix)
                if len(pending) > keep:
                    output(bytes(pending[: len(pending) - keep]))
                    del pending[: len(pending) - keep]
                return
            if i:
                output(bytes(pending[:i]))
                del pending[:i]
            match = _MARKER_RE.match(pending)
            if match is None:
                if len(pending) > len(prefix) + _CWD_MAX:  # not a marker after all
                    output(bytes(pending[: len(prefix)]))
                    del pending[: len(prefix)]
                    continue
                return  # the rest of the marker is still on its way
            if match.group(4):
                del pending[: match.end()]
                started()
                continue
            # Read the groups before deleting: a match on a bytearray sees later mutations.
            code, cwd = int(match.group(2)), match.group(3).decode("utf-8", errors="replace")
            del pending[: match.end()]
            prompt(Prompt(exit_code=code, cwd=cwd))


def set_terminal_mode(fd: int) -> None:
    """No echo, non-canonical input (no 4095-byte line limit), signals on (Ctrl-C works).

    Set from our side of the pty (Linux applies a master's termios to the slave) and checked
    before every command: bash restores its own saved modes after a job dies of a signal.
    """
    try:
        attrs = termios.tcgetattr(fd)
    except termios.error:
        return
    lflag = attrs[3]
    wanted = (lflag & ~(termios.ECHO | termios.ICANON)) | termios.ISIG
    if wanted != lflag:
        attrs[3] = wanted
        attrs[6][termios.VMIN] = 1
        attrs[6][termios.VTIME] = 0
        with contextlib.suppress(termios.error):
            termios.tcsetattr(fd, termios.TCSANOW, attrs)


# System calls that wait on one descriptor given as their first argument (read, readv, pread64),
# and those that wait on a set of them (poll, select and kin), by machine: /proc/<pid>/syscall
# gives the number of the call a blocked process is in.
_READS = {"x86_64": frozenset({0, 17, 19}), "aarch64": frozenset({63, 65, 67})}
_POLLS = {"x86_64": frozenset({7, 23, 270, 271}), "aarch64": frozenset({72, 73})}


def waiting_for_terminal_input(fd: int) -> bool:
    """Whether the terminal's foreground process is blocked reading the terminal: a `cat`,
    `uniq` or `python` typed with no input, waiting for keys nobody will press. False wherever
    that cannot be known."""
    return foreground_reads_terminal(fd) is True


def foreground_reads_terminal(fd: int, pgrp: int | None = None) -> bool | None:
    """Whether the terminal's foreground process (the leader of its foreground group) is blocked
    reading the terminal; with `pgrp`, also that this group is the foreground one. Read from
    /proc (the sandbox's processes are this process's descendants, so their system call and
    descriptors are readable). None where that cannot be known."""
    try:
        fg = os.tcgetpgrp(fd)
    except OSError:
        return None
    if pgrp is not None and fg != pgrp:
        return False
    try:
        fields = Path(f"/proc/{fg}/syscall").read_text().split()
    except (OSError, ValueError):
        return None
    if len(fields) < 2 or not fields[0].isdigit():  # "running", or blocked outside a system call
        return False
    call, machine = int(fields[0]), platform.machine()
    if call in _READS.get(machine, ()):
        descriptor = int(fields[1], 16)
    elif call in _POLLS.get(machine, ()):
        descriptor = 0  # the set is in the process's memory: count it when its input is the terminal
    else:
        return False
    try:
        target = os.readlink(f"/proc/{fg}/fd/{descriptor}")
    except OSError:
        return None
    return target.startswith("/dev/pts/") or target in ("/dev/tty", "/dev/console")


def foreground_job(fd: int, shell_pgrp: int | None) -> int | None:
    """The terminal's foreground process group when it is a job of the shell, not bash itself."""
    try:
        fg = os.tcgetpgrp(fd)
    except OSError:
        return None
    if fg <= 0 or fg == shell_pgrp:
        return None
    return fg


def timeout_hint(kind: str, hard: float, quiet: float | None) -> str:
    """Why a command was stopped (`hard` limit or `quiet` too long) and what to do instead."""
    if kind == "hard":
        return f"The command timed out after {hard:g}s (hard limit)."
    if kind == "input":
        return (
            "The command was waiting for input from the terminal, and nobody types here, so it was "
            "stopped. Give it its input non-interactively: a pipe or a file (`printf 'a\\nb\\n' | uniq`, "
            "`cat file.txt`), or for Python a script or `python3 -c '...'` instead of the interactive prompt."
        )
    return (
        f"The command printed nothing for {quiet:g}s and was stopped. If it was waiting for "
        "input, pass the input non-interactively (e.g. `printf 'y\\n' | cmd` or a flag such as "
        "-y); if it is slow, run it in the background with output to a file "
        "(`cmd > out.log 2>&1 &`) and check on it."
    )


def recovery_hint(outcome: str, cwd: str) -> str:
    """What bringing the shell back to a prompt cost: "interrupted", "killed" or "restarted"."""
    if outcome == "interrupted":
        return "It was interrupted with Ctrl-C; the shell is ready, its state is kept."
    if outcome == "killed":
        return "It ignored Ctrl-C, so its process group was killed; the shell is ready, its state is kept."
    return (
        f"The shell did not recover, so it was restarted in {cwd}; environment "
        "variables and shell state were reset."
    )


_RESTARTED = {
    "dead": "The previous shell had exited; this command ran in a new shell started in {cwd} "
    "(environment variables and shell state were reset).",
    "stuck": "The previous (cancelled) command could not be stopped; the shell was restarted in {cwd} "
    "(environment variables and shell state were reset).",
    "exited": "The shell exited (status {code}). A new shell was started in {cwd}; environment variables, "
    "functions and background jobs of the old one are gone.",
}


def restart_hint(why: Literal["dead", "stuck", "exited"], cwd: str, code: int | None = None) -> str:
    """Why the command ran in, or left behind, a new shell: found dead, stuck after a cancel, or exited."""
    return _RESTARTED[why].format(cwd=cwd, code=code)
