# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""One entry point from a spec to a running sandbox, whatever the backend."""

from __future__ import annotations

from nemo_gym_prorl.sandbox.apptainer import ApptainerSandbox
from nemo_gym_prorl.sandbox.base import Sandbox
from nemo_gym_prorl.sandbox.bubblewrap import BubblewrapSandbox
from nemo_gym_prorl.sandbox.local_unsafe import UnsafeLocalSandbox
from nemo_gym_prorl.sandbox.spec import BackendName, SandboxSpec

BACKENDS: dict[BackendName, type[Sandbox]] = {
    "bubblewrap": BubblewrapSandbox,
    "apptainer": ApptainerSandbox,
    "local_unsafe": UnsafeLocalSandbox,
}


def open_sandbox(spec: SandboxSpec | None = None, **overrides: object) -> Sandbox:
    """Create a sandbox from `spec` (default: bubblewrap over the host system, no network)."""
    spec = (spec or SandboxSpec()).model_copy(update=overrides) if overrides else (spec or SandboxSpec())
    return BACKENDS[spec.backend](spec)
