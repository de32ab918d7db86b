# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""One entry point from a spec to a running sandbox, whatever the backend."""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import Future

from nemo_gym_prorl.latency import SANDBOX_OPEN
from nemo_gym_prorl.registry import RegistryError
from nemo_gym_prorl.sandbox.apptainer import ApptainerSandbox
from nemo_gym_prorl.sandbox.base import Sandbox
from nemo_gym_prorl.sandbox.bubblewrap import BubblewrapSandbox
from nemo_gym_prorl.sandbox.local_unsafe import UnsafeLocalSandbox
from nemo_gym_prorl.sandbox.spec import BACKENDS, SandboxSpec
from nemo_gym_prorl.sandbox.threads import in_sandbox_thread, sandbox_pool

for _backend in (BubblewrapSandbox, ApptainerSandbox, UnsafeLocalSandbox):
    BACKENDS.register(_backend.backend, _backend)


def open_sandbox(spec: SandboxSpec | None = None, **overrides: object) -> Sandbox:
    """Create a sandbox from `spec` (default: bubblewrap over the host system, no network)."""
    spec = (spec or SandboxSpec()).model_copy(update=overrides) if overrides else (spec or SandboxSpec())
    started = time.monotonic()
    sandbox = BACKENDS.create(spec.backend, spec)
    SANDBOX_OPEN.observe(time.monotonic() - started)
    if not isinstance(sandbox, Sandbox):
        raise RegistryError(
            f"sandbox backend {spec.backend!r} built a {type(sandbox).__name__}, not a Sandbox"
        )
    return sandbox


async def aopen_sandbox(spec: SandboxSpec | None = None) -> Sandbox:
    """`open_sandbox` off the event loop (an Apptainer instance's start blocks for seconds).

    Cancelled while it opens, the thread still finishes the open: the sandbox it makes then is
    closed as soon as it exists, rather than left running with nobody to close it."""
    opening = asyncio.ensure_future(in_sandbox_thread(open_sandbox, spec))
    try:
        return await asyncio.shield(opening)
    except asyncio.CancelledError:
        opening.add_done_callback(_close_unwanted)
        raise


def _close_unwanted(opening: asyncio.Future[Sandbox] | Future[Sandbox]) -> None:
    if opening.cancelled() or opening.exception() is not None:
        return
    sandbox_pool().submit(opening.result().close)
