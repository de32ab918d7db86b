# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""What a sandbox is asked to be: backend, filesystem, network and resource limits.

`BACKENDS` is the table of backends a spec may name. It lives here, with the vocabulary of
what can be asked, and is filled by `sandbox.factory`, which imports the implementations (the
`sandbox` package imports it first, so a spec never sees the table empty). A backend of one's
own is named by import target, `sandbox.backend=mypkg.mod:MySandbox`: a `Sandbox` subclass, or
a function of the `SandboxSpec` returning one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator

from nemo_gym_prorl.registry import Registry

# Factories of `Sandbox`, typed loosely: the spec sits below the class it configures (base
# imports it), and `open_sandbox` checks what a factory built.
BACKENDS: Registry[object] = Registry("sandbox backend")
# A registered backend ("bubblewrap", "apptainer", "local_unsafe") or `package.module:factory`.
BackendName = Annotated[str, AfterValidator(BACKENDS.check)]
PythonRuntime = Literal["sandbox", "project", "none"]


class SandboxLimits(BaseModel):
    """Resource limits on every process started inside a sandbox, and on all of them together.

    `None` switches a limit off. Defaults are generous enough for test suites and IPython
    kernels, tight enough that a runaway policy cannot take the host down.
    """

    model_config = ConfigDict(extra="forbid")

    wall_time_s: float | None = Field(600.0, gt=0, description="Default per-process wall-clock limit.")
    memory_mb: int | None = Field(8192, gt=0, description="Address-space limit per process (RLIMIT_AS).")
    max_processes: int | None = Field(
        256,
        gt=0,
        description="Processes and threads alive at once in the sandbox (pids cgroup or RLIMIT_NPROC).",
    )
    max_output_bytes: int = Field(
        256 * 1024, gt=0, description="Captured stdout+stderr per call; the middle is dropped beyond this."
    )
    max_file_mb: int | None = Field(
        1024, gt=0, description="Largest file a process may write (RLIMIT_FSIZE)."
    )
    sandbox_memory_mb: int | None = Field(
        None,
        gt=0,
        description="Memory of the whole sandbox, all its processes together, swap included (memory "
        "cgroup): past it the kernel kills a process of the sandbox. Enforced where a memory cgroup is "
        "writable (cgroup v1 memory hierarchy or a delegated v2 subtree); elsewhere logged and not enforced.",
    )
    cpus: float | None = Field(
        None,
        ge=0.01,
        description="CPU time of the whole sandbox, in CPUs (cpu cgroup quota: 1.5 = one and a half "
        "cores' time each period). Enforced where a cpu cgroup is writable; elsewhere logged and not enforced.",
    )
    nice: int | None = Field(
        10,
        ge=0,
        le=19,
        description="CPU priority of everything the sandbox runs, as nice(1): 0 is the service's own, 19 the "
        "lowest. The service drives every rollout from one event loop; at 10 a sandbox that computes hard "
        "yields the CPU to it rather than stalling every other rollout's turns. Its processes cannot lower "
        "it again (that needs CAP_SYS_NICE). Where a cpu cgroup is writable, all niced sandboxes also sit "
        "in cpu groups below one parent, weighing together as one program beside the service: a nice ranks "
        "a process only within its scheduling group, and the kernel's autogroups would make each sandbox's "
        "session weigh as much as the whole service. None: unchanged.",
    )
    accept_no_process_limit: bool = Field(
        False,
        description="Start even where `max_processes` cannot be enforced (running as root, where "
        "RLIMIT_NPROC does not bind, without a writable pids cgroup). Off: such a sandbox refuses to start.",
    )


class SandboxSpec(BaseModel):
    """A request for a sandbox. Every field has a default a real user can run.

    `image` means: a rootfs directory for bubblewrap (None = the host's system directories,
    read-only), a `.sif` file or sandbox directory for Apptainer (required there).
    """

    model_config = ConfigDict(extra="forbid")

    backend: BackendName = "bubblewrap"
    image: str | None = None
    workspace: Path | None = Field(
        None, description="Host directory mounted read-write; None = a fresh one, deleted on close."
    )
    workspace_mount: str = Field("/workspace", description="Where the workspace appears inside.")
    env: dict[str, str] = Field(default_factory=dict)
    network: bool = Field(False, description="Allow network access (loopback only when False).")
    limits: SandboxLimits = Field(default_factory=SandboxLimits)
    ro_binds: list[Path] = Field(
        default_factory=list, description="Extra host paths visible read-only at the same path inside."
    )
    python_runtime: PythonRuntime = Field(
        "sandbox",
        description="The Python first on PATH inside. sandbox: the minimal runtime built by `prorl "
        "sandbox setup` (IPython kernel, pytest, numpy, sympy; no graders, no task data), read-only at "
        "/opt/prorl-runtime. project: this project's venv, graders included: only for trusted grading "
        "code that never runs policy code. none: whatever the image provides.",
    )
    hidden_dirs: list[str] = Field(
        default_factory=list,
        description="Directories shown empty inside (an image's hidden tests while the agent works), "
        "absolute paths; the files stay where they are, outside the sandbox's view.",
    )
    fakeroot: bool = Field(False, description="Apptainer only: run as root inside via --fakeroot.")
    root_dir: Path | None = Field(
        None,
        description="Where fresh sandbox directories are created (default: $PRORL_SANDBOX_ROOT or the temp dir).",
    )

    @field_validator("hidden_dirs")
    @classmethod
    def _absolute_and_plain(cls, value: list[str]) -> list[str]:
        for path in value:
            if not path.startswith("/") or ".." in path.split("/") or path.rstrip("/") == "":
                raise ValueError(f"hidden_dirs takes absolute paths below / without '..': {path!r}")
        return value

    @field_validator("python_runtime", mode="before")
    @classmethod
    def _legacy_bool(cls, value: object) -> object:
        # Older configs said `python_runtime: true/false`; true now means the sandbox runtime.
        if isinstance(value, bool):
            return "sandbox" if value else "none"
        return value
