# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Who may join a live persistent sandbox: only a holder of what its owner handed out.

The owner of a persistent sandbox records how to join it (its `JoinTicket`: the init's pid and
start time, its namespaces, its host directories and bubblewrap arguments) in a registry that
only this host user can read, under a fresh secret, and hands out a `JoinGrant` (the sandbox's
id and that secret). Joining redeems a grant: the secret is checked against the registry's
digest, and everything about the sandbox (pid, directories, mounts, limits) comes from the
registry, never from the grant. A forged or altered grant is refused; a grant whose sandbox has
closed is refused too (the owner removes its entry on close).

The registry is a directory of `<sandbox id>.json` files, mode 0600, in a 0700 directory of
this user's: `$PRORL_JOIN_REGISTRY`, else `/dev/shm/prorl-sandbox-joins-<uid>` (memory: gone
with the boot, like the sandboxes it names), else the temp directory. A directory that is not
this user's alone is refused.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import hmac
import os
import re
import secrets
import stat
import tempfile
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from nemo_gym_prorl.sandbox.base import SandboxError

REGISTRY_VARIABLE = "PRORL_JOIN_REGISTRY"
_SANDBOX_ID = re.compile(r"^[0-9a-f]{12}$")


class JoinRefusedError(SandboxError):
    """A grant that its sandbox's owner did not hand out (or whose sandbox is gone)."""


class JoinGrant(BaseModel):
    """What an owner hands out to let another process of this host and user join its sandbox."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    sandbox_id: str = Field(pattern=_SANDBOX_ID.pattern)
    secret: str = Field(min_length=32, max_length=128)


class _Entry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    secret_sha256: str
    ticket: dict[str, object]  # a JoinTicket, validated by its reader (persistent.py owns the type)


def registry_dir() -> Path:
    """This user's registry directory, made 0700 if missing; refused if anyone else could write
    or read it."""
    configured = os.environ.get(REGISTRY_VARIABLE)
    if configured:
        base = Path(configured)
    else:
        shm = Path("/dev/shm")
        parent = shm if shm.is_dir() and os.access(shm, os.W_OK | os.X_OK) else Path(tempfile.gettempdir())
        base = parent / f"prorl-sandbox-joins-{os.getuid()}"
    with contextlib.suppress(FileExistsError):
        base.mkdir(mode=0o700, parents=False)
    info = os.lstat(base)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise SandboxError(
            f"the sandbox join registry {base} is not a directory of this user's alone (mode 0700): "
            f"refusing to trust it (set {REGISTRY_VARIABLE} to another place)"
        )
    return base


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def register(sandbox_id: str, ticket: BaseModel) -> JoinGrant:
    """Record how to join `sandbox_id` under a fresh secret; the grant that redeems it."""
    grant = JoinGrant(sandbox_id=sandbox_id, secret=secrets.token_urlsafe(32))
    entry = _Entry(secret_sha256=_digest(grant.secret), ticket=ticket.model_dump(mode="json"))
    directory = registry_dir()
    staging = directory / f".{sandbox_id}.{secrets.token_hex(4)}"
    fd = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(entry.model_dump_json())
    os.replace(staging, directory / f"{sandbox_id}.json")
    return grant


def unregister(sandbox_id: str) -> None:
    if _SANDBOX_ID.match(sandbox_id):
        with contextlib.suppress(OSError, SandboxError):
            (registry_dir() / f"{sandbox_id}.json").unlink()


def redeem(grant: JoinGrant) -> dict[str, object]:
    """The registered ticket of the grant's sandbox, once its secret checks out."""
    path = registry_dir() / f"{grant.sandbox_id}.json"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ELOOP):
            raise JoinRefusedError(
                f"sandbox {grant.sandbox_id} is not a live sandbox of this host and user (closed, or never handed out)"
            ) from None
        raise
    with os.fdopen(fd) as source:
        if os.fstat(source.fileno()).st_uid != os.getuid():
            raise JoinRefusedError(f"sandbox {grant.sandbox_id}: its registry entry is not this user's")
        try:
            entry = _Entry.model_validate_json(source.read())
        except ValidationError:
            raise JoinRefusedError(f"sandbox {grant.sandbox_id}: its registry entry is unreadable") from None
    if not hmac.compare_digest(entry.secret_sha256, _digest(grant.secret)):
        raise JoinRefusedError(
            f"sandbox {grant.sandbox_id}: the grant's secret is not the one its owner handed out"
        )
    return entry.ticket
