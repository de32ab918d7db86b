# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Fixtures for the tool tests: real sandboxes (bubblewrap, or local_unsafe where isolation is
not the point), torn down after each test."""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator, Iterator

import pytest

from nemo_gym_prorl.sandbox import Sandbox, SandboxSpec, open_sandbox
from nemo_gym_prorl.tools.pty_shell import PtyShell


@pytest.fixture
def sandbox() -> Iterator[Sandbox]:
    """A bubblewrap sandbox with a fresh workspace (skips where bwrap is missing)."""
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap (`bwrap`) is not installed: apt-get install bubblewrap")
    with open_sandbox(SandboxSpec(backend="bubblewrap")) as sb:
        yield sb


@pytest.fixture
def local_sandbox() -> Iterator[Sandbox]:
    """A local_unsafe sandbox, for backend-independence checks (an unprivileged service's only:
    a root service refuses it; the unprivileged suite runs these)."""
    if os.geteuid() == 0:
        pytest.skip("local_unsafe is refused for a root service; runs in the unprivileged suite")
    with open_sandbox(SandboxSpec(backend="local_unsafe")) as sb:
        yield sb


@pytest.fixture
async def shell(sandbox: Sandbox) -> AsyncIterator[PtyShell]:
    """A started shell with test-sized limits (short grace, small output cap)."""
    sh = PtyShell(sandbox, timeout=20.0, no_output_timeout=None, max_output_bytes=8192, interrupt_grace_s=0.5)
    await sh.start()
    yield sh
    sh.close()
