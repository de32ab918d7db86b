# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Gym's `SandboxSpec` in this project's terms, field by field; what cannot be honoured is
refused here, before anything starts, with the reason."""

from __future__ import annotations

import logging
import platform
import posixpath
from pathlib import Path
from typing import Any, Literal

from nemo_gym.sandbox.providers.base import SandboxCreateError, SandboxResources
from nemo_gym.sandbox.providers.base import SandboxSpec as GymSandboxSpec
from pydantic import BaseModel, ConfigDict, Field, field_validator

from nemo_gym_prorl.sandbox.bubblewrap import SYSTEM_DIRS
from nemo_gym_prorl.sandbox.limits import writable_controllers
from nemo_gym_prorl.sandbox.persistent import PERSISTENT_BACKEND
from nemo_gym_prorl.sandbox.spec import PythonRuntime, SandboxLimits, SandboxSpec

logger = logging.getLogger(__name__)

HOST = "host"
# The project's bubblewrap sandbox with persistent namespaces (`nemo_gym_prorl.sandbox.persistent`).
BACKEND = PERSISTENT_BACKEND
DEFAULT_WORKDIR = "/workspace"
# Gym's `platform.arch` spelling against the kernel's.
_ARCH = {"amd64": "x86_64", "x86_64": "x86_64", "arm64": "aarch64", "aarch64": "aarch64"}
# Where a workdir would hide what the sandbox itself provides.
_RESERVED_TOP = {*SYSTEM_DIRS, "proc", "dev", "sys", "run"}


class BubblewrapProviderConfig(BaseModel):
    """The provider's constructor kwargs: the block under `bubblewrap:` in a Gym config."""

    model_config = ConfigDict(extra="forbid")

    images: dict[str, str] = Field(
        default_factory=dict,
        description="Image name -> 'host' (the host's system dirs, read-only, plus the sandbox Python "
        "runtime) or an absolute rootfs directory. Bubblewrap pulls nothing: an image named in no "
        "entry and not itself a rootfs directory is refused.",
    )
    default_image: str = Field(HOST, description="What a spec without an image runs on.")
    network: str = Field("none", description="Only 'none': the sandbox sees loopback only.")
    python_runtime: PythonRuntime = Field(
        "sandbox", description="The Python first on PATH inside (see the project's SandboxSpec)."
    )
    shell: str = Field("/bin/bash", description="Runs each exec's command string (`shell -c`).")
    default_timeout_s: float = Field(180.0, gt=0, description="exec's limit when the caller gives none.")
    ready_timeout_s: float = Field(60.0, gt=0, description="create's limit when the spec gives none.")
    max_output_bytes: int = Field(1 << 20, gt=0, description="Per stream and exec; the middle is dropped.")
    unenforced_resources: Literal["warn", "refuse"] = Field(
        "warn",
        description="What a `resources` request this machine cannot enforce does (`disk_gib` always; "
        "`memory_mib` and `cpu` without a writable memory or cpu cgroup): 'warn' logs it, records it "
        "on the handle and runs without, as Gym's local and apptainer providers do; 'refuse' fails create.",
    )
    limits: SandboxLimits = Field(default_factory=SandboxLimits)
    root_dir: Path | None = Field(None, description="Where sandbox directories go (default: temp dir).")
    ro_binds: list[Path] = Field(default_factory=list, description="Host paths shown read-only.")

    @field_validator("network")
    @classmethod
    def _no_network(cls, value: str) -> str:
        if value != "none":
            raise ValueError(
                f"network={value!r}: the bubblewrap provider only supports 'none' (each sandbox has "
                "its own network namespace with loopback only); there is no allow-list of hosts"
            )
        return value

    @field_validator("images")
    @classmethod
    def _targets(cls, value: dict[str, str]) -> dict[str, str]:
        for name, target in value.items():
            if target != HOST and not Path(target).is_absolute():
                raise ValueError(f"images[{name!r}]={target!r}: give 'host' or an absolute rootfs directory")
        return value


def resolve_image(image: str | None, config: BubblewrapProviderConfig) -> str | None:
    """The rootfs directory to run on, or None for the host's system directories."""
    name = image if image is not None else config.default_image
    target = config.images.get(name, name)
    if target == HOST:
        return None
    if Path(target).is_absolute() and Path(target).is_dir():
        return target
    raise SandboxCreateError(
        f"bubblewrap cannot run image {name!r}: it pulls no container images. Map it to a rootfs "
        f"directory or to the host system with the provider option `images: {{{name!r}: host}}`"
        + (f" (the mapped {target!r} is not a directory)" if target != name else "")
    )


def resolve_workdir(workdir: str | None) -> str:
    """Where the workspace appears inside; the default working directory of every command."""
    if workdir is None:
        return DEFAULT_WORKDIR
    path = posixpath.normpath(workdir)
    top = path.strip("/").split("/", 1)[0]
    if not path.startswith("/") or path == "/" or top in _RESERVED_TOP:
        raise SandboxCreateError(
            f"workdir={workdir!r}: give an absolute directory outside the system directories "
            f"({', '.join(sorted('/' + t for t in _RESERVED_TOP))})"
        )
    return path


def resource_limits(
    resources: SandboxResources, config: BubblewrapProviderConfig
) -> tuple[SandboxLimits, list[str]]:
    """The provider's limits with the spec's requests applied, and the requests left unenforced,
    each as `field=value: why`. Memory and CPU bound the whole sandbox through its cgroups where this
    machine lets us write them; what cannot be bound is reported, never silently approximated."""
    if resources.gpu or resources.gpu_type:
        raise SandboxCreateError("bubblewrap sandboxes have no GPU access: resources.gpu is refused")
    controllers = writable_controllers()
    update: dict[str, Any] = {}
    unenforced: list[str] = []
    if resources.memory_mib is not None:
        update["memory_mb"] = resources.memory_mib  # RLIMIT_AS too: no one process reserves more
        if "memory" in controllers:
            update["sandbox_memory_mb"] = resources.memory_mib
        else:
            unenforced.append(
                f"memory_mib={resources.memory_mib}: no writable memory cgroup on this machine, so only "
                "each process's address space is capped (RLIMIT_AS), not the sandbox's total"
            )
    if resources.cpu is not None:
        if "cpu" in controllers:
            update["cpus"] = resources.cpu
        else:
            unenforced.append(
                f"cpu={resources.cpu:g}: no writable cpu cgroup on this machine, so CPU is uncapped"
            )
    if resources.disk_gib is not None:
        update["max_file_mb"] = resources.disk_gib * 1024  # a guard: the largest file (RLIMIT_FSIZE)
        unenforced.append(
            f"disk_gib={resources.disk_gib}: bubblewrap has no disk quota; only each file is capped at "
            f"{resources.disk_gib} GiB (RLIMIT_FSIZE), not the sandbox's total"
        )
    if unenforced:
        summary = "; ".join(f"resources.{entry}" for entry in unenforced)
        if config.unenforced_resources == "refuse":
            raise SandboxCreateError(f"{summary} (provider option unenforced_resources=refuse)")
        logger.warning("not enforced for this sandbox: %s", summary)
    return config.limits.model_copy(update=update), unenforced


def check_provider_options(options: dict[str, Any]) -> None:
    """Per-spec options: only `platform`, which must be this machine's."""
    unknown = sorted(set(options) - {"platform"})
    if unknown:
        raise SandboxCreateError(
            f"unknown bubblewrap provider_options: {', '.join(unknown)} (known: platform)"
        )
    wanted = options.get("platform") or {}
    os_name, arch = wanted.get("os", "linux"), wanted.get("arch")
    machine = platform.machine()
    if os_name != "linux" or (arch is not None and _ARCH.get(arch, arch) != machine):
        raise SandboxCreateError(
            f"provider_options.platform={wanted!r}: bubblewrap runs on this host only (linux/{machine})"
        )


def project_spec(spec: GymSandboxSpec, config: BubblewrapProviderConfig) -> tuple[SandboxSpec, list[str]]:
    """The project's `SandboxSpec` for Gym's, and the requests it leaves unenforced."""
    if spec.ports:
        raise SandboxCreateError(
            f"ports={list(spec.ports)}: bubblewrap sandboxes have no network (loopback only inside), "
            "so no port can be exposed"
        )
    check_provider_options(dict(spec.provider_options))
    limits, unenforced = resource_limits(spec.resources, config)  # type: ignore[arg-type]
    project = SandboxSpec(
        backend=BACKEND,
        image=resolve_image(spec.image, config),
        workspace_mount=resolve_workdir(spec.workdir),
        env=dict(spec.env),
        network=False,
        limits=limits,
        ro_binds=list(config.ro_binds),
        python_runtime=config.python_runtime,
        root_dir=config.root_dir,
    )
    return project, unenforced
