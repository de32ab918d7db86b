# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""No policy becomes the host's root, on any sandbox kind: the first things an attacker inside
checks, each answered from the host.

Every kind runs the same probe (`support.privilege_probe`): the one-shot bubblewrap sandbox, the
persistent one, a process that joined it from its owner's grant, and the Gym provider's sandbox
(owned and connected). Each must run as an unprivileged uid (the sandboxes' identity under a
root service, the service's own user otherwise), with every capability set empty, `Seccomp: 2`
and no_new_privs; `chmod 4755` and a setuid `open` are refused and nothing the host sees is
setuid; pid 1 (bubblewrap) shows no host path; the host's loopback (where the model server
listens) is out of reach. The harness's processes are probed in
tests/agent/harness/test_harness_confinement.py. This module runs in a root session and again
as an unprivileged service (tests/security/test_unprivileged_service.py).
"""

from __future__ import annotations

import asyncio
import json
import shlex
import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from nemo_gym.sandbox.providers.base import SandboxSpec as GymSandboxSpec
from support.privilege_probe import PROBE, host_paths, request, verdict

from nemo_gym_prorl.integrations.gym.sandbox_provider import BubblewrapProvider
from nemo_gym_prorl.sandbox import Sandbox, SandboxSpec, open_sandbox
from nemo_gym_prorl.sandbox.persistent import PERSISTENT_BACKEND, JoinedBubblewrapSandbox

pytestmark = pytest.mark.bwrap


@pytest.fixture(scope="module")
def model_port() -> Iterator[int]:
    """A listener on the host's loopback, as the embedded model server is."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        yield listener.getsockname()[1]


async def probe(sandbox: Sandbox, port: int) -> dict[str, Any]:
    result = await sandbox.exec(
        [sandbox.python, "-c", PROBE], stdin=request(ports=[port]).encode(), timeout=60
    )
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def check(report: dict[str, Any], sandbox: Sandbox, port: int) -> None:
    verdict(report, host_dir=sandbox.workspace, hidden=host_paths(sandbox.workspace, sandbox.tmp_dir.parent))
    assert report["reach"][str(port)] != "connected", "the host's loopback is reachable"


@pytest.fixture
async def persistent(tmp_path: Path) -> AsyncIterator[Sandbox]:
    owner = await asyncio.to_thread(open_sandbox, SandboxSpec(backend=PERSISTENT_BACKEND, root_dir=tmp_path))
    yield owner
    await owner.aclose()


async def test_the_one_shot_sandbox(tmp_path: Path, model_port: int) -> None:
    async with open_sandbox(SandboxSpec(root_dir=tmp_path)) as sandbox:
        check(await probe(sandbox, model_port), sandbox, model_port)


async def test_the_persistent_sandbox_and_a_process_that_joined_it(
    persistent: Sandbox, model_port: int
) -> None:
    check(await probe(persistent, model_port), persistent, model_port)
    joined = await asyncio.to_thread(JoinedBubblewrapSandbox, persistent.join_grant())  # type: ignore[attr-defined]
    try:
        check(await probe(joined, model_port), persistent, model_port)
    finally:
        await joined.aclose()


async def test_the_gym_providers_sandbox_owned_and_connected(tmp_path: Path, model_port: int) -> None:
    owner, borrower = (
        BubblewrapProvider(root_dir=str(tmp_path / "o")),
        BubblewrapProvider(root_dir=str(tmp_path / "b")),
    )
    handle = await owner.create(GymSandboxSpec())
    borrowed = await borrower.connect(await owner.serialize_handle(handle))
    sandbox: Sandbox = handle.raw.sandbox
    command = f"echo {shlex.quote(request(ports=[model_port]))} | python -c {shlex.quote(PROBE)}"
    try:
        for provider, each in ((owner, handle), (borrower, borrowed)):
            result = await provider.exec(each, command, timeout_s=60)
            assert result.return_code == 0, result.stderr
            check(json.loads(result.stdout), sandbox, model_port)
    finally:
        await borrower.close(borrowed)
        await owner.close(handle)


async def test_the_sandboxs_host_directories_are_closed_to_other_users(tmp_path: Path) -> None:
    async with open_sandbox(SandboxSpec(root_dir=tmp_path)) as sandbox:
        for directory in (sandbox.workspace.parent, sandbox.workspace, sandbox.tmp_dir):
            assert directory.stat().st_mode & 0o077 == 0, (directory, oct(directory.stat().st_mode))
