# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""`BubblewrapProvider`: NeMo Gym's `SandboxProvider` (and its PTY and connect capabilities) over
this project's bubblewrap sandbox. Selected in a Gym config as `sandbox_provider: {bubblewrap: {...}}`
(registered under the `nemo_gym.sandbox_providers` entry point).

Connect (Gym's `ConnectableProvider`): `serialize_handle` hands out a grant to a live sandbox (its
id and a secret the owner registered, `sandbox.join_registry`) and `connect`, in another process
of the same host and user, redeems it: where the sandbox is and how it is mounted come from the
owner's registry, never from the descriptor, so a forged or altered descriptor joins nothing. A handle from `connect` is borrowed: its
`close` releases what this process holds (its own commands and terminals) and leaves the
sandbox running; only the handle from `create` (the owner's) ends it. Unlike Gym's docker and
apptainer providers, where either handle stops the container, a borrower cannot end the
owner's sandbox by mistake; Gym's borrowers release with `AsyncSandbox.disconnect()` anyway."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import os
import posixpath
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nemo_gym.sandbox.providers.base import (
    SandboxCreateError,
    SandboxExecResult,
    SandboxHandle,
    SandboxPtySpec,
    SandboxSpec,
    SandboxStatus,
)
from nemo_gym.sandbox.providers.local.provider import SANDBOX_RUNTIME_RETURN_CODE
from pydantic import BaseModel, ConfigDict, ValidationError

from nemo_gym_prorl.integrations.gym.sandbox_provider.pty import BubblewrapPtySession
from nemo_gym_prorl.integrations.gym.sandbox_provider.spec_map import BubblewrapProviderConfig, project_spec
from nemo_gym_prorl.sandbox import SandboxError
from nemo_gym_prorl.sandbox.join_registry import JoinGrant
from nemo_gym_prorl.sandbox.persistent import (
    JoinedBubblewrapSandbox,
    NamespaceBubblewrapSandbox,
    PersistentBubblewrapSandbox,
    SandboxGoneError,
)
from nemo_gym_prorl.sandbox.workspace_fs import read_no_follow, write_no_follow

logger = logging.getLogger(__name__)


@dataclass
class _Box:
    """The provider's state behind one `SandboxHandle`."""

    sandbox: NamespaceBubblewrapSandbox
    workdir: str
    metadata: dict[str, str]
    unenforced: list[str]
    expiry: asyncio.Task[None] | None = None
    ptys: list[BubblewrapPtySession] = field(default_factory=list)
    expired: bool = False
    borrowed: bool = False  # from `connect`: the sandbox is another handle's to close


class BubblewrapDescriptor(BaseModel):
    """What `serialize_handle` gives and `connect` takes (JSON). `workdir` and `ports` are the
    keys Gym's `AsyncSandbox.serialize` reads and adds; `grant` is the owner's capability."""

    model_config = ConfigDict(extra="allow")

    provider: str
    sandbox_id: str
    workdir: str
    grant: JoinGrant


def describe_sandbox(sandbox: NamespaceBubblewrapSandbox, workdir: str | None = None) -> dict[str, Any]:
    """The connect descriptor of a live persistent sandbox, whoever opened it (this provider, or
    a resources server lending its session's sandbox)."""
    grant = sandbox.join_grant()
    return BubblewrapDescriptor(
        provider=BubblewrapProvider.name, sandbox_id=f"bwrap-{grant.sandbox_id}",
        workdir=workdir or sandbox.spec.workspace_mount, grant=grant,
    ).model_dump(mode="json")  # fmt: skip


def check_user(user: str | int | None, sandbox: NamespaceBubblewrapSandbox) -> None:
    """A sandbox has one user, unprivileged and without capabilities (the sandboxes' identity
    under a root service, else the service's own user). A command may name it, or no one, or
    `root`/0, which Gym's agents ask for to be sure they may write (`anyswe_agent`,
    `anyterminal_agent`): it runs as that one user, the most a policy's command is ever given.
    Any other user is refused."""
    uid = sandbox.identity.uid if sandbox.identity is not None else os.getuid()
    names = {"0", "root", str(uid)} | ({sandbox.identity.name} if sandbox.identity is not None else set())
    if user is not None and str(user) not in names:
        raise ValueError(
            f"user={user!r}: a bubblewrap sandbox runs every process as its one unprivileged user "
            f"(uid {uid}, no capabilities; `root` names it too); no other user exists there. Use user=None"
        )


class BubblewrapProvider:
    """Sandboxes in bubblewrap on this host: rootless, no network, no image pulls."""

    name = "bubblewrap"

    def __init__(self, **options: Any) -> None:
        self.config = BubblewrapProviderConfig(**options)
        self._boxes: dict[int, _Box] = {}  # by id(box): a sandbox may be owned and borrowed here

    # -- lifecycle ------------------------------------------------------------------------------
    async def create(self, spec: SandboxSpec) -> SandboxHandle:
        project, unenforced = project_spec(spec, self.config)
        timeout = float(spec.ready_timeout_s or self.config.ready_timeout_s)
        try:
            sandbox = await asyncio.to_thread(PersistentBubblewrapSandbox, project, ready_timeout_s=timeout)
        except (SandboxError, ValueError) as exc:
            raise SandboxCreateError(f"bubblewrap sandbox could not be created: {exc}") from exc
        box = _Box(sandbox, project.workspace_mount, dict(spec.metadata), unenforced)
        handle = SandboxHandle(sandbox_id=f"bwrap-{sandbox.id}", provider_name=self.name, raw=box)
        try:
            for target, text in spec.files.items():
                await self._write(box, target, text.encode())
            if spec.entrypoint:
                # Like a container's main process: it runs beside the commands until close.
                await sandbox.spawn(list(spec.entrypoint), stdout=asyncio.subprocess.DEVNULL,
                                    stderr=asyncio.subprocess.DEVNULL)  # fmt: skip
        except BaseException as exc:
            await sandbox.aclose()
            if isinstance(exc, SandboxError):
                raise SandboxCreateError(f"bubblewrap sandbox did not start: {exc}") from exc
            raise
        if spec.ttl_s:
            box.expiry = asyncio.create_task(self._expire(handle, float(spec.ttl_s)))
        self._boxes[id(box)] = box
        return handle

    async def _expire(self, handle: SandboxHandle, ttl_s: float) -> None:
        await asyncio.sleep(ttl_s)
        logger.info("sandbox %s reached its ttl_s=%g: closing it", handle.sandbox_id, ttl_s)
        handle.raw.expired = True
        await self._teardown(handle.raw)

    async def status(self, handle: SandboxHandle) -> SandboxStatus:
        box: _Box = handle.raw
        if box.sandbox.closed:
            return SandboxStatus.STOPPED
        if box.sandbox.init_alive:
            return SandboxStatus.RUNNING
        # A borrowed sandbox whose init is gone was closed by its owner; an owned one crashed.
        return SandboxStatus.STOPPED if box.borrowed else SandboxStatus.ERROR

    async def close(self, handle: SandboxHandle) -> None:
        """The owner's handle ends the sandbox; a borrowed one (from `connect`) only releases
        this process's part of it: its commands, terminals and namespace fds."""
        box: _Box = handle.raw
        self._boxes.pop(id(box), None)
        if box.expiry is not None and box.expiry is not asyncio.current_task():
            box.expiry.cancel()
        await self._teardown(box)

    async def _teardown(self, box: _Box) -> None:
        for session in box.ptys:
            await session.close()
        await box.sandbox.aclose()

    async def aclose(self) -> None:
        """Owned sandboxes are processes of this one: none may outlive the provider. Borrowed ones
        are released, and stay with their owner."""
        for handle_id, box in list(self._boxes.items()):
            self._boxes.pop(handle_id, None)
            if box.expiry is not None:
                box.expiry.cancel()
            await self._teardown(box)

    # -- connect (Gym's ConnectableProvider) -----------------------------------------------------
    async def serialize_handle(self, handle: SandboxHandle, *, scope: str | None = None) -> dict[str, Any]:
        """A descriptor `connect` rebuilds a handle from, in another process of this host and
        user: a trusted control-plane message (host paths, bwrap arguments), like Gym's apptainer
        descriptor. `scope` is unused: there are no leases to mint."""
        box = self._open_box(handle)
        return describe_sandbox(box.sandbox, box.workdir)

    async def connect(self, descriptor: Mapping[str, Any]) -> SandboxHandle:
        """Join the live sandbox `descriptor` names. Refused (`SandboxCreateError`) when it is
        not a bubblewrap descriptor, or its sandbox is closed, on another host, or its init's pid
        now belongs to another process."""
        try:
            described = BubblewrapDescriptor.model_validate(dict(descriptor))
        except ValidationError as exc:
            raise SandboxCreateError(
                "bubblewrap connect needs the full descriptor from serialize_handle "
                f"(provider, sandbox_id, workdir, grant), not a bare sandbox id: {exc}"
            ) from exc
        if described.provider != self.name:
            raise SandboxCreateError(f"not a bubblewrap sandbox descriptor (provider={described.provider!r})")
        try:
            sandbox = await asyncio.to_thread(
                JoinedBubblewrapSandbox, described.grant, root_dir=self.config.root_dir
            )
        except SandboxError as exc:
            raise SandboxCreateError(
                f"cannot connect to bubblewrap sandbox {described.sandbox_id}: {exc}"
            ) from exc
        box = _Box(sandbox, described.workdir, {}, [], borrowed=True)
        handle = SandboxHandle(sandbox_id=described.sandbox_id, provider_name=self.name, raw=box)
        # Kept with the owned ones: `aclose` (what Gym's `disconnect` calls) releases it.
        self._boxes[id(box)] = box
        return handle

    # -- commands -------------------------------------------------------------------------------
    def _open_box(self, handle: SandboxHandle) -> _Box:
        box: _Box = handle.raw
        if box.sandbox.closed:
            reason = "reached its ttl_s" if box.expired else "is closed"
            raise RuntimeError(f"sandbox {handle.sandbox_id} {reason}")
        if box.borrowed and not box.sandbox.init_alive:
            raise SandboxGoneError(f"sandbox {handle.sandbox_id} was closed by its owner")
        return box

    async def exec(
        self,
        handle: SandboxHandle,
        command: str,
        *,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout_s: int | float | None = None,
        user: str | int | None = None,
    ) -> SandboxExecResult:
        box = self._open_box(handle)
        check_user(user, box.sandbox)
        timeout = float(timeout_s if timeout_s is not None else self.config.default_timeout_s)
        result = await box.sandbox.exec(
            [self.config.shell, "-c", command],
            cwd=cwd or box.workdir,
            env=env,
            timeout=timeout,
            max_output_bytes=self.config.max_output_bytes,
        )
        if result.timed_out:
            return SandboxExecResult(
                stdout=result.stdout,
                stderr=f"bubblewrap command timed out after {timeout:g}s\n{result.stderr}",
                return_code=SANDBOX_RUNTIME_RETURN_CODE,
                error_type="timeout",
            )
        return SandboxExecResult(stdout=result.stdout, stderr=result.stderr, return_code=result.exit_code)

    async def create_pty(self, handle: SandboxHandle, spec: SandboxPtySpec) -> BubblewrapPtySession:
        box = self._open_box(handle)
        check_user(spec.user, box.sandbox)
        argv = [self.config.shell] if spec.command is None else [self.config.shell, "-c", spec.command]
        env = {"TERM": "xterm-256color", **(spec.env or {})} if spec.pty else dict(spec.env or {})
        session = BubblewrapPtySession(box.sandbox, argv, cwd=spec.cwd or box.workdir, env=env,
                                       rows=spec.rows, cols=spec.cols, pty=spec.pty)  # fmt: skip
        await session.start()
        box.ptys = [s for s in box.ptys if not s.closed] + [session]
        return session

    # -- files ----------------------------------------------------------------------------------
    def _writable_root(self, box: _Box, target: str) -> tuple[Path, list[str]] | None:
        """The host directory behind a path inside, and the path's parts below it, when the
        path lies in one of the sandbox's writable mounts (the workspace wins: it is bound last)."""
        inside = posixpath.normpath(target if target.startswith("/") else posixpath.join(box.workdir, target))
        for mount, host in ((box.workdir, box.sandbox.workspace), ("/tmp", box.sandbox.tmp_dir)):
            if inside == mount or inside.startswith(mount.rstrip("/") + "/"):
                return host, [p for p in inside[len(mount) :].split("/") if p]
        return None

    async def _write(self, box: _Box, target: str, data: bytes) -> None:
        found = self._writable_root(box, target)
        if found is None:
            raise ValueError(
                f"{target!r} is read-only in a bubblewrap sandbox: files go under the workdir "
                f"({box.workdir}) or /tmp"
            )
        await asyncio.to_thread(write_no_follow, *found, data)

    async def upload_file(self, handle: SandboxHandle, source_path: Path, target_path: str) -> None:
        box = self._open_box(handle)
        await self._write(box, target_path, await asyncio.to_thread(Path(source_path).read_bytes))

    async def download_file(self, handle: SandboxHandle, source_path: str, target_path: Path) -> None:
        box = self._open_box(handle)
        found = self._writable_root(box, source_path)
        if found is not None:
            data = await asyncio.to_thread(read_no_follow, *found)
        else:  # the read-only system view: read it from inside, as the sandbox sees it
            data = await self._read_inside(box, source_path)
        target_path.parent.mkdir(parents=True, exist_ok=True)
        await asyncio.to_thread(target_path.write_bytes, data)

    async def _read_inside(self, box: _Box, path: str) -> bytes:
        result = await box.sandbox.exec(
            ["/bin/sh", "-c", f"base64 < {shlex.quote(path)}"],
            timeout=self.config.default_timeout_s,
            max_output_bytes=1 << 30,
        )
        if not result.ok:
            raise FileNotFoundError(f"{path!r} in sandbox: {result.stderr.strip()}")
        with contextlib.suppress(ValueError):
            return base64.b64decode(result.stdout)
        raise OSError(f"{path!r} in sandbox: unreadable output")
