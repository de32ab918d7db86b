# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The harness's fork server (`python -m nemo_gym_prorl.agent.harness.zygote`; the service
starts it with `agent.harness.forkserver`): one process per harness that imports the harness's
heavy modules once (mini-swe-agent's litellm costs ~5 s of CPU per import) and forks a child for
each rollout, which starts at once.

It runs where a harness process runs (the same environment and confinement,
`process.harness_plan`). Its standard input carries JSON lines: `{"harness": spec}` first, then
`{"run": id}` (a rollout, whose request the service wrote to `<home>/<id>/request.json`:
`child.run_request`'s) and `{"kill": id}`. It answers JSON lines on standard output:
`{"ready": true}`, then `{"started": id}` and `{"ended": id, "status": code}`. A child reads
and removes its request, writes its `HarnessRun` to `<home>/<id>/run.json` and what the harness
prints to `<home>/<id>/stderr`, in its own home, which the service reads. The server never reads
a request: no rollout's token is in the memory every later child is forked from.

Isolation between rollouts: each child is its own process group (the unit killed) with its own
home, and neither it nor the server may be read by another process of the user (not dumpable:
no /proc/<pid>/mem, environ or ptrace), so a child holds its own rollout's door token and
cannot read a sibling's or the server's. Confined (the server runs in bubblewrap, under the
syscall filter but for `unshare` and `mount`), a child first gives itself a user and mount
namespace of its own in which the homes' directory is an empty tmpfs holding its own home alone
(`_private_home`: siblings' homes, requests and answers are not there), then drops every
capability and loads the whole filter before the harness runs. End of input (the service closed it, or died) kills
every child and ends the server.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import selectors
import signal
import sys
from pathlib import Path
from typing import Any

from nemo_gym_prorl.agent.harness.child import CONFINED_VARIABLE, build_harness, run_request

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
MS_NOSUID, MS_NODEV, MS_BIND, MS_REC, MS_PRIVATE = 0x2, 0x4, 0x1000, 0x4000, 1 << 18


def _prctl(option: int, value: int) -> None:
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)


def _say(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def _c(text: str | None) -> bytes | None:
    return None if text is None else text.encode()


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.mount(_c(source), _c(target), _c(fstype), ctypes.c_ulong(flags), _c(data)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {target}: {os.strerror(err)}")


def _drop_capabilities() -> None:
    """Every capability set empty (a new user namespace grants them all in it): the bounding
    set first, which takes CAP_SETPCAP, then the rest."""
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in range(64):  # nothing regained through exec
        libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable: two words each, all zero
    if libc.capset(header, data) != 0:
        raise OSError(ctypes.get_errno(), "capset")


def _private_home(homes: Path, own: Path) -> None:
    """See only `own` of the homes' directory: a user and mount namespace of this child's, the
    directory covered by an empty tmpfs, `own` bound back; then no capability and the whole
    syscall filter (the server's lacks what this needed)."""
    uid, gid = os.getuid(), os.getgid()
    # Its own id maps are written through /proc/self, which a process that is not dumpable
    # cannot write: dumpable for these few calls (no secret is held yet), not after.
    _prctl(PR_SET_DUMPABLE, 1)
    os.unshare(os.CLONE_NEWUSER | os.CLONE_NEWNS)
    Path("/proc/self/setgroups").write_text("deny")
    Path("/proc/self/uid_map").write_text(f"{uid} {uid} 1")
    Path("/proc/self/gid_map").write_text(f"{gid} {gid} 1")
    _mount(None, "/", None, MS_REC | MS_PRIVATE, None)
    # Held before the tmpfs hides it, in this namespace (a mount of another cannot be bound).
    keep = os.open(own, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    _mount("tmpfs", str(homes), "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755")
    own.mkdir()
    _mount(f"/proc/self/fd/{keep}", str(own), None, MS_BIND | MS_REC, None)
    os.close(keep)
    _drop_capabilities()
    _prctl(PR_SET_NO_NEW_PRIVS, 1)
    _prctl(PR_SET_DUMPABLE, 0)  # the namespace switch reset it
    from nemo_gym_prorl.sandbox.seccomp import load_filter

    load_filter()


def _child(harness: Any, rollout: str, home: Path) -> None:
    """In the forked child: run one rollout, write its run, exit (never returns)."""
    status = 1
    try:
        os.setsid()  # its own process group: what the service kills
        _prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL))
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        _prctl(PR_SET_DUMPABLE, 0)
        work = home / rollout
        with open(work / "stderr", "wb", buffering=0) as log:
            os.dup2(log.fileno(), 1)
            os.dup2(log.fileno(), 2)
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        if os.environ.get(CONFINED_VARIABLE):
            _private_home(home, work)
        request = json.loads((work / "request.json").read_text())
        (work / "request.json").unlink()
        (work / "tmp").mkdir()
        os.environ.update(HOME=str(work), TMPDIR=str(work / "tmp"))
        os.chdir(work)
        run = run_request(harness, request)
        (work / "run.json").write_text(run.model_dump_json())
        status = 0
    except BaseException as exc:  # the harness's own defect: its trace is what the service reports
        import traceback

        with contextlib.suppress(Exception):
            traceback.print_exception(exc)
    finally:
        os._exit(status)


def main() -> int:
    _prctl(PR_SET_DUMPABLE, 0)
    _prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL))
    home = Path(os.environ["HOME"])
    stdin = sys.stdin.buffer
    first = json.loads(stdin.readline())
    harness = build_harness(first["harness"])
    preload = getattr(harness, "preload", None)
    if preload is not None:
        preload()  # the imports every rollout would make: made once, shared by every fork
    children: dict[int, str] = {}  # pid -> rollout id

    wakeup_r, wakeup_w = os.pipe()
    os.set_blocking(wakeup_w, False)
    signal.set_wakeup_fd(wakeup_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so the wakeup fd is written
    selector = selectors.DefaultSelector()
    selector.register(stdin, selectors.EVENT_READ, "input")
    selector.register(wakeup_r, selectors.EVENT_READ, "signal")
    _say({"ready": True})
    buffer = b""
    try:
        while True:
            for key, _ in selector.select():
                if key.data == "signal":
                    os.read(wakeup_r, 4096)
                    _reap(children)
                    continue
                chunk = os.read(stdin.fileno(), 65536)
                if not chunk:
                    return 0  # the service closed its end: nothing more will be asked
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    _handle(json.loads(line), harness, home, children)
    finally:
        for pid in children:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
        _reap(children, block=True)


def _handle(message: dict[str, Any], harness: Any, home: Path, children: dict[int, str]) -> None:
    if "kill" in message:
        for pid, rollout in children.items():
            if rollout == message["kill"]:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pid, signal.SIGKILL)
        return
    rollout = str(message["run"])
    pid = os.fork()
    if pid == 0:
        _child(harness, rollout, home)
    children[pid] = rollout
    _say({"started": rollout})


def _reap(children: dict[int, str], *, block: bool = False) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, 0 if block else os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        rollout = children.pop(pid, None)
        if rollout is not None:
            _say({"ended": rollout, "status": os.waitstatus_to_exitcode(status)})


if __name__ == "__main__":
    sys.exit(main())
