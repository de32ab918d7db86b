# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""What an attacker inside a sandbox (or a harness process) checks first, and what the host must
see of it: one Python probe run inside every kind, one verdict taken outside.

The probe (`PROBE`, run with `python -c`, a JSON request on standard input) reports its uid,
capability sets, seccomp mode and no_new_privs; the command line and environment of pid 1 (the
sandbox's init, bubblewrap itself); whether `chmod 4755` and `open(O_CREAT, 06755)` work on a
copy of /bin/sh; which loopback ports it can connect to; what it can read of given paths; and the
entries of its home's parent directory (siblings' homes, for a harness). `verdict` checks it
from the host: never uid 0, every capability set empty, `Seccomp: 2`, no file the host sees as
setuid or setgid, and no host path in what pid 1 shows.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

from nemo_gym_prorl.sandbox.identity import sandbox_identity
from nemo_gym_prorl.sandbox.runtime import prorl_home

PROBE = r"""
import json, os, shutil, socket, sys, time
request = json.loads(sys.stdin.read() or "{}")
time.sleep(request.get("pause_s", 0))
def text(path):
    try:
        with open(path, "rb") as handle:
            return handle.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError as exc:
        return "<%s>" % exc.strerror
status = {}
for line in open("/proc/self/status").read().splitlines():
    key, _, value = line.partition(":")
    status[key] = value.strip()
out = {key: status.get(key) for key in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "Seccomp", "NoNewPrivs")}
out.update(uid=os.getuid(), euid=os.geteuid(), gid=os.getgid(), uid_map=text("/proc/self/uid_map"),
           init_cmdline=text("/proc/1/cmdline"), init_environ=text("/proc/1/environ"))
target = os.path.join(request.get("dir") or os.getcwd(), "setuid-probe")
shutil.copy("/bin/sh", target)
try:
    os.chmod(target, 0o4755)
    out["chmod_setuid"] = "allowed"
except OSError as exc:
    out["chmod_setuid"] = exc.strerror
try:
    os.close(os.open(target + "-created", os.O_CREAT | os.O_WRONLY, 0o6755))
    out["create_setuid"] = "made"
except OSError as exc:
    out["create_setuid"] = exc.strerror
out["setuid_files"] = [target, target + "-created"]
out["modes"] = [os.stat(path).st_mode for path in out["setuid_files"] if os.path.exists(path)]
reach = {}
for port in request.get("ports", []):
    probe = socket.socket()
    probe.settimeout(2)
    try:
        probe.connect(("127.0.0.1", port))
        reach[str(port)] = "connected"
    except OSError as exc:
        reach[str(port)] = exc.strerror or type(exc).__name__
    finally:
        probe.close()
out["reach"] = reach
out["reads"] = {path: text(path) for path in request.get("read", [])}
home = os.environ.get("HOME", "")
try:
    out["home_siblings"] = sorted(os.listdir(os.path.dirname(home.rstrip("/")))) if home else []
except OSError as exc:
    out["home_siblings"] = ["<%s>" % exc.strerror]
print(json.dumps(out))
"""


def request(**fields: Any) -> str:
    return json.dumps(fields)


def host_paths(*extra: Path) -> list[str]:
    """Host paths that must not show inside: this service's home, checkout, venv, interpreter,
    the user's home, and what the caller adds (a sandbox's own directory)."""
    checkout = Path(__file__).resolve().parents[2]
    paths = {
        prorl_home(),
        checkout,
        Path(sys.prefix).resolve(),
        Path(sys.base_prefix).resolve(),
        Path.home(),
        *extra,
    }
    return sorted(str(p) for p in paths if str(p) not in ("/", ""))


def verdict(report: dict[str, Any], *, host_dir: Path | None, hidden: list[str]) -> None:
    """Assert, from the host, that the probe ran unprivileged, filtered, and left nothing setuid
    (`host_dir`: where the probe's files are on the host, while they still are; None: gone, and
    the probe's uid inside is its uid on the host)."""
    identity = sandbox_identity()
    expected_uid = identity.uid if identity is not None else os.getuid()
    if host_dir is None:
        assert report["uid"] == report["euid"] == expected_uid != 0, report
    else:
        # Its uid on the host is the owner of what it made (inside a user namespace it may read
        # another number: a process that joined an unprivileged service's sandbox is that
        # namespace's uid 0, which is this user on the host).
        made = host_dir / Path(report["setuid_files"][0]).name
        assert made.exists(), f"the probe's file is not where the host expects it: {made}"
        assert made.stat().st_uid == expected_uid != 0, (made.stat().st_uid, report)
        if identity is not None:  # no user namespace: the uid inside is the host's
            assert report["uid"] == report["euid"] == expected_uid, report
    assert report["modes"] and not any(mode & (stat.S_ISUID | stat.S_ISGID) for mode in report["modes"]), (
        report
    )
    for key in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert int(report[key], 16) == 0, (key, report[key])
    assert report["Seccomp"] == "2" and report["NoNewPrivs"] == "1", report
    assert report["chmod_setuid"] != "allowed", report
    for inside in report["setuid_files"] if host_dir is not None else []:
        on_host = host_dir / Path(inside).name
        if on_host.exists():
            mode = on_host.stat().st_mode
            assert not mode & (stat.S_ISUID | stat.S_ISGID), (on_host, oct(mode))
    for where in ("init_cmdline", "init_environ"):
        for path in hidden:
            assert path not in report[where], (where, path, report[where])
