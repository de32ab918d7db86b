# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Who a sandbox's processes are on the host.

A service run by an unprivileged user needs nothing here: bubblewrap makes a user namespace in
which that user is the only one, and drops every capability. A service run as root must not
hand its uid to the policy: bubblewrap started by root maps the sandbox's user to host uid 0,
whatever `--uid` says, with every capability unless told otherwise. So a root service gives each
sandbox a dedicated unprivileged host identity instead: the sandbox's command starts through
`setpriv`, which takes that uid and gid, clears the supplementary groups and every capability
set (the bounding set included), and sets `no_new_privs`. The identity is

- `PRORL_SANDBOX_USER` when set: a user name, or `uid[:gid]` (numbers need no passwd entry);
- else the system user `prorl-sandbox`, made at set-up (`prorl sandbox setup`) or on first use.

uid 0 and gid 0 are refused, whatever the setting.
"""

from __future__ import annotations

import fcntl
import functools
import grp
import logging
import os
import pwd
import subprocess
from pathlib import Path

from pydantic import BaseModel

logger = logging.getLogger(__name__)

USER_VARIABLE = "PRORL_SANDBOX_USER"
DEFAULT_USER = "prorl-sandbox"
# Capabilities bubblewrap keeps for the command when root starts it: exactly what `setpriv`
# needs to become the sandbox's user (set ids, drop the bounding set) and to enter the
# workspace it is about to own (0700, that user's). setpriv drops them all before it runs the command.
ROOT_LAUNCH_CAPS = ("CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP", "CAP_DAC_OVERRIDE")
_LOCK = Path("/run/lock/prorl-sandbox-user.lock")


class SandboxIdentityError(RuntimeError):
    """No unprivileged host identity could be found or made for a root service's sandboxes."""


class HostIdentity(BaseModel):
    """An unprivileged host user a root service's sandboxes run as."""

    uid: int
    gid: int
    name: str

    def setpriv(self) -> list[str]:
        """The argv prefix that becomes this identity with no capability and no way back."""
        return [
            find_setpriv(),
            f"--reuid={self.uid}",
            f"--regid={self.gid}",
            "--clear-groups",
            *_NO_CAPABILITY,
        ]

    def chown(self, path: Path) -> None:
        os.chown(path, self.uid, self.gid, follow_symlinks=False)


_SYSTEM_BIN = ("/usr/bin", "/bin", "/usr/sbin", "/sbin")
# Every capability set emptied (the bounding set too: exec then grants none, even to a
# namespace's root), and no way to regain any.
_NO_CAPABILITY = ("--inh-caps=-all", "--ambient-caps=-all", "--bounding-set=-all", "--no-new-privs", "--")


def drop_capabilities() -> list[str]:
    """The argv prefix that keeps the user and drops every capability, for good (it needs
    CAP_SETPCAP to empty the bounding set)."""
    return [find_setpriv(), *_NO_CAPABILITY]


def system_program(name: str) -> str | None:
    """A program of the system's own directories (never one found first on a user's PATH: a
    root service runs it)."""
    for directory in _SYSTEM_BIN:
        candidate = os.path.join(directory, name)
        if os.access(candidate, os.X_OK):
            return candidate
    return None


@functools.cache
def nice_prefix(niceness: int) -> list[str]:
    """A host command prefix that lowers the CPU priority of what it execs (coreutils `nice`;
    any user may lower its own priority). Without `nice` on the host: no prefix, said once."""
    found = system_program("nice")
    if found is None:
        logger.warning("nice (coreutils) is not installed: sandboxes run at the service's own CPU priority")
        return []
    return [found, "-n", str(niceness)]


def find_setpriv() -> str:
    found = system_program("setpriv")
    if found is None:
        raise SandboxIdentityError(
            "setpriv (util-linux) is not installed: a root service needs it to drop root"
        )
    return found


def _parse(setting: str) -> HostIdentity:
    if setting.replace(":", "").isdigit():
        uid_text, _, gid_text = setting.partition(":")
        uid = int(uid_text)
        gid = int(gid_text) if gid_text else uid
        return HostIdentity(uid=uid, gid=gid, name=setting)
    try:
        entry = pwd.getpwnam(setting)
    except KeyError:
        raise SandboxIdentityError(f"{USER_VARIABLE}={setting!r}: no such user") from None
    return HostIdentity(uid=entry.pw_uid, gid=entry.pw_gid, name=setting)


def _lookup(name: str) -> HostIdentity | None:
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        return None
    return HostIdentity(uid=entry.pw_uid, gid=entry.pw_gid, name=name)


def ensure_default_user() -> HostIdentity:
    """The `prorl-sandbox` system user, made now if it is missing (root only; serialised, as
    several processes may start their first sandbox at once)."""
    found = _lookup(DEFAULT_USER)
    if found is not None:
        return found
    useradd = system_program("useradd")
    if useradd is None:
        raise SandboxIdentityError(
            f"no user {DEFAULT_USER!r} and no useradd to make it: create an unprivileged user for the "
            f"sandboxes, or name one with {USER_VARIABLE}=NAME or {USER_VARIABLE}=UID:GID"
        )
    _LOCK.parent.mkdir(parents=True, exist_ok=True)
    with open(_LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = _lookup(DEFAULT_USER)
        if found is None:
            made = subprocess.run(
                [useradd, "--system", "--user-group", "--no-create-home", "--home-dir", "/nonexistent",
                 "--shell", "/usr/sbin/nologin", "--comment", "nemo-gym-prorl sandboxes", DEFAULT_USER],
                capture_output=True, text=True, check=False,
            )  # fmt: skip
            found = _lookup(DEFAULT_USER)
            if found is None:
                raise SandboxIdentityError(f"could not make the user {DEFAULT_USER!r}: {made.stderr.strip()}")
    return found


@functools.cache
def _resolve(setting: str | None) -> HostIdentity:
    identity = _parse(setting) if setting else ensure_default_user()
    if identity.uid == 0 or identity.gid == 0:
        raise SandboxIdentityError(
            f"the sandboxes' host identity must not be root (uid {identity.uid}, gid {identity.gid})"
        )
    try:
        group = grp.getgrgid(identity.gid).gr_name
    except KeyError:
        group = str(identity.gid)
    if group in ("root", "wheel", "sudo", "adm", "shadow", "disk", "docker"):
        raise SandboxIdentityError(f"the sandboxes' host group {group!r} is privileged")
    return identity


def sandbox_identity() -> HostIdentity | None:
    """The host identity this process's sandboxes take, or None when the service itself is an
    unprivileged user (its sandboxes are that user, with no capability)."""
    if os.geteuid() != 0:
        return None
    return _resolve(os.environ.get(USER_VARIABLE) or None)
