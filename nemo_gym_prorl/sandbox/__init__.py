# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Rootless sandboxes: bubblewrap (default), Apptainer/Singularity (HPC), local_unsafe (debug)."""

from nemo_gym_prorl.sandbox.base import ExecResult, Sandbox, SandboxError, SandboxPathError
from nemo_gym_prorl.sandbox.factory import aopen_sandbox, open_sandbox
from nemo_gym_prorl.sandbox.process import SandboxProcess
from nemo_gym_prorl.sandbox.spec import BACKENDS, BackendName, SandboxLimits, SandboxSpec

__all__ = [
    "BACKENDS",
    "BackendName",
    "ExecResult",
    "Sandbox",
    "SandboxError",
    "SandboxLimits",
    "SandboxPathError",
    "SandboxProcess",
    "SandboxSpec",
    "aopen_sandbox",
    "open_sandbox",
]
