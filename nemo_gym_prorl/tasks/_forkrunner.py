# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The in-sandbox half of the test runner: a warm Python process that forks one fresh child
per test. It is started *inside* a sandbox as `python -I -c <this file's source>`, so it may
import only the standard library, and nothing in the sandbox can modify its code.

Protocol (binary, on its stdin/stdout): each request and reply is a 4-byte big-endian length
followed by that many bytes of JSON. Request keys: `code` (str, run as `__main__`), `stdin`
(str), `timeout_s`, `memory_mb`, `max_output_bytes`, `argv`. Reply keys: `exit_code`,
`signal`, `stdout`, `stderr`, `timed_out`, `output_truncated`, `duration_s`, `error_type`.

Isolation of each test from the others (and from this runner):
  - a fresh process forked from a pristine interpreter that never runs test code itself;
  - its own process group, killed as a whole at the end; the runner is a child subreaper, so
    descendants that escaped the group (setsid, double fork) are re-parented to it and killed
    too before the next test starts;
  - its own empty working directory and TMPDIR; afterwards the runner wipes the sandbox's
    temp dir and workspace, so no file written by one test is visible to the next;
  - its own rlimits: address space, CPU seconds, file size, no core dumps; wall-clock timeout
    and an output cap enforced by the runner (a flood is cut off, the child killed).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import resource
import selectors
import signal
import struct
import sys
import tempfile
import time
import traceback

# Imported once in the parent, then shared copy-on-write by every forked test process.
_PRELOAD = (
    "math", "re", "collections", "itertools", "functools", "heapq", "bisect", "string", "typing",
    "fractions", "decimal", "statistics", "random", "copy", "operator", "hashlib", "json",
    "datetime", "array", "io", "dataclasses", "enum", "abc", "unittest", "doctest",
)  # fmt: skip

_PR_SET_CHILD_SUBREAPER = 36
_EXIT_MEMORY = 120
_EXIT_INTERNAL = 121


def _become_subreaper() -> bool:
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except Exception:
        return False


def _read_exact(stream, n: int) -> bytes | None:
    buf = b""
    while len(buf) < n:
        chunk = stream.read(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf


def _child(req: dict, workdir: str, stdin_path: str, w_out: int, w_err: int) -> None:
    """Runs in the forked process; never returns."""
    try:
        os.setpgid(0, 0)
        fd_in = os.open(stdin_path, os.O_RDONLY)
        os.dup2(fd_in, 0)
        os.dup2(w_out, 1)
        os.dup2(w_err, 2)
        for fd in (fd_in, w_out, w_err):
            if fd > 2:
                os.close(fd)
        os.chdir(workdir)
        os.environ["TMPDIR"] = workdir
        os.environ["HOME"] = workdir
        tempfile.tempdir = None
        mem = int(req.get("memory_mb") or 0)
        if mem > 0:
            resource.setrlimit(resource.RLIMIT_AS, (mem * 1024 * 1024, mem * 1024 * 1024))
        timeout = float(req.get("timeout_s") or 10.0)
        cpu = int(timeout) + 1
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        fsize = int(req.get("max_file_mb") or 64) * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
        sys.stdin = open(0, encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
        sys.stdout = open(1, "w", encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
        sys.argv = list(req.get("argv") or ["solution.py"])
        sys.path.insert(0, workdir)
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    except BaseException:
        os._exit(_EXIT_INTERNAL)
    code = 0
    try:
        compiled = compile(req.get("code", ""), "solution.py", "exec")
        exec(compiled, {"__name__": "__main__", "__builtins__": __builtins__})
    except SystemExit as exc:
        if exc.code is None:
            code = 0
        elif isinstance(exc.code, int):
            code = exc.code & 0xFF
        else:
            with contextlib.suppress(BaseException):
                print(exc.code, file=sys.stderr)
            code = 1
    except MemoryError:
        with contextlib.suppress(BaseException):
            sys.stderr.write("MemoryError: memory limit exceeded\n")
        code = _EXIT_MEMORY
    except BaseException:
        with contextlib.suppress(BaseException):
            traceback.print_exc()
        code = 1
    with contextlib.suppress(BaseException):
        sys.stdout.flush()
    with contextlib.suppress(BaseException):
        sys.stderr.flush()
    os._exit(code)


def _children_of(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # pid (comm) state ppid ...: comm may contain spaces and parens; split after the last ')'
        rest = stat[stat.rfind(b")") + 2 :].split()
        if len(rest) > 1 and int(rest[1]) == pid:
            found.append(int(entry))
    return found


def _reap_all() -> None:
    """Kill and reap every remaining descendant (re-parented to us as subreaper)."""
    me = os.getpid()
    for _ in range(100):
        kids = _children_of(me)
        if not kids:
            break
        for kid in kids:
            with contextlib.suppress(OSError):
                os.killpg(kid, signal.SIGKILL)
            with contextlib.suppress(OSError):
                os.kill(kid, signal.SIGKILL)
        for kid in kids:
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(kid, 0)
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            break


def _mount_points() -> set[str]:
    """Every mount point in this (the sandbox's) mount namespace, read once at start-up.

    Binds of host paths can sit under a directory we wipe: a venv in a checkout under /tmp is
    bound at its own path inside the sandbox's /tmp. They are read-only and may hold tens of
    thousands of files; walking them after every test cost hundreds of milliseconds and could
    delete nothing. Tests cannot add mounts to this namespace, so the set stays valid."""
    found: set[str] = set()
    with contextlib.suppress(OSError), open("/proc/self/mountinfo", encoding="utf-8") as f:
        for line in f:
            fields = line.split()
            if len(fields) > 4:
                # octal escapes (\040 for a space) as the kernel writes them
                found.add(re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4]))
    return found


def _wipe(directory: str, keep: frozenset[str]) -> None:
    """Remove everything under `directory` except the mount points in `keep` (and the
    directories leading to them); never descends into a mount."""
    with contextlib.suppress(OSError), os.scandir(directory) as entries:
        for entry in entries:
            path = entry.path
            if path in keep:
                continue
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                is_dir = False
            if is_dir:
                _wipe(path, keep)
                with contextlib.suppress(OSError):
                    os.rmdir(path)  # fails, as it should, on a parent of a kept mount
            else:
                with contextlib.suppress(OSError):
                    os.unlink(path)


def _protected(wipe_dirs: list[str]) -> frozenset[str]:
    """Mount points strictly below the wiped directories: left alone by `_wipe`."""
    roots = [os.path.realpath(d) for d in wipe_dirs]
    below = set()
    for mount in _mount_points():
        for root in roots:
            if mount != root and mount.startswith(root.rstrip("/") + "/"):
                below.add(mount)
    return frozenset(below)


def run_one(req: dict, wipe_dirs: list[str], keep: frozenset[str] = frozenset()) -> dict:
    timeout = float(req.get("timeout_s") or 10.0)
    cap = int(req.get("max_output_bytes") or 65536)
    tmp_root = wipe_dirs[0]
    workdir = tempfile.mkdtemp(prefix="t", dir=tmp_root)
    stdin_path = os.path.join(tmp_root, f".stdin-{os.path.basename(workdir)}")
    with open(stdin_path, "wb") as f:
        f.write((req.get("stdin") or "").encode())
    r_out, w_out = os.pipe()
    r_err, w_err = os.pipe()
    sys.stdout.flush()
    started = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        os.close(r_out)
        os.close(r_err)
        _child(req, workdir, stdin_path, w_out, w_err)
    os.close(w_out)
    os.close(w_err)
    with contextlib.suppress(OSError):
        os.setpgid(pid, pid)  # also set by the child; whichever runs first wins the race
    bufs = {r_out: bytearray(), r_err: bytearray()}
    sel = selectors.DefaultSelector()
    sel.register(r_out, selectors.EVENT_READ)
    sel.register(r_err, selectors.EVENT_READ)
    pidfd = -1
    with contextlib.suppress(OSError, AttributeError):
        pidfd = os.pidfd_open(pid)
        sel.register(pidfd, selectors.EVENT_READ)
    deadline = started + timeout
    timed_out = truncated = False
    open_fds = 2
    status = None
    while open_fds:
        now = time.perf_counter()
        remaining = deadline - now
        if remaining <= 0:
            timed_out = status is None
            break
        if status is not None:  # exited: drain briefly; a descendant may still hold the pipes
            remaining = min(remaining, 0.05)
        events = sel.select(remaining)
        if not events and status is not None:
            break
        for key, _ in events:
            if key.fd == pidfd:
                sel.unregister(pidfd)
                wpid, st = os.waitpid(pid, os.WNOHANG)
                if wpid == pid:
                    status = st
                continue
            chunk = os.read(key.fd, 65536)
            if not chunk:
                sel.unregister(key.fd)
                open_fds -= 1
                continue
            buf = bufs[key.fd]
            room = cap - len(buf)
            if room > 0:
                buf += chunk[:room]
            if len(chunk) > room:
                truncated = True
        if truncated:
            break
    sel.close()
    if pidfd >= 0:
        os.close(pidfd)
    with contextlib.suppress(OSError):
        os.killpg(pid, signal.SIGKILL)  # the test's whole group, whatever state it is in
    os.close(r_out)
    os.close(r_err)
    if status is None:
        _, status = os.waitpid(pid, 0)
    duration = time.perf_counter() - started
    _reap_all()
    for directory in wipe_dirs:
        _wipe(directory, keep)
    exit_code = os.waitstatus_to_exitcode(status)
    sig = -exit_code if exit_code < 0 else 0
    error_type = None
    if timed_out:
        error_type = "timeout"
    elif truncated:
        error_type = "output_limit"
    elif exit_code == _EXIT_MEMORY or (sig == signal.SIGKILL and b"MemoryError" in bufs[r_err]):
        error_type = "memory_limit"
    elif sig == signal.SIGXCPU:
        error_type = "cpu_limit"
    elif sig == signal.SIGXFSZ:
        error_type = "file_size_limit"
    elif exit_code == _EXIT_INTERNAL:
        error_type = "runner_internal"
    elif sig:
        error_type = f"signal_{sig}"
    elif exit_code != 0:
        error_type = "exit_nonzero"
    return {
        "exit_code": exit_code,
        "signal": sig,
        "stdout": bufs[r_out].decode("utf-8", errors="replace"),
        "stderr": bufs[r_err].decode("utf-8", errors="replace"),
        "timed_out": timed_out,
        "output_truncated": truncated,
        "duration_s": duration,
        "error_type": error_type,
    }


def main() -> None:
    for name in _PRELOAD:
        with contextlib.suppress(Exception):
            __import__(name)
    subreaper = _become_subreaper()
    wipe_dirs = [os.path.realpath(tempfile.gettempdir())]
    if "--wipe-cwd" in sys.argv[1:]:
        wipe_dirs.append(os.path.realpath(os.getcwd()))
    keep = _protected(wipe_dirs)
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    hello = json.dumps({"ready": True, "pid": os.getpid(), "subreaper": subreaper}).encode()
    stdout.write(struct.pack(">I", len(hello)) + hello)
    stdout.flush()
    while True:
        header = _read_exact(stdin, 4)
        if header is None:
            return
        body = _read_exact(stdin, struct.unpack(">I", header)[0])
        if body is None:
            return
        try:
            reply = run_one(json.loads(body), wipe_dirs, keep)
        except Exception as exc:  # a runner bug must not take the runner down
            reply = {"runner_error": f"{type(exc).__name__}: {exc}"}
        data = json.dumps(reply).encode()
        stdout.write(struct.pack(">I", len(data)) + data)
        stdout.flush()


if __name__ == "__main__":
    main()
