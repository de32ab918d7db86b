# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The HPC backend: Apptainer (or SingularityCE), rootless, one instance per sandbox.

The instance is started with `--containall --no-home --writable-tmpfs`, no network unless
asked (`--net --network none`), optional `--fakeroot`, and the workspace bound at
`workspace_mount`; every process then runs with `exec instance://NAME`, so all processes of a
sandbox share its namespaces, like a container. Works with `.sif` files and sandbox directories,
and with whichever of `apptainer` / `singularity` is on PATH.

The command lines are built here rather than with spython: the sandbox must hand out an argv
(the PTY shell and the IPython kernel spawn `exec instance://...` themselves, in their own
process group, with their own I/O), while spython runs its commands itself and returns their
output; so the project does not depend on it.

Instances are daemons, not our children, so they cannot die with us by themselves. Their names
carry the owning process id (`prorl-<pid>-<id>`): `reap_orphan_instances()` stops those whose
owner is gone, and only those, since no one else names instances that way.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
from pathlib import Path

from nemo_gym_prorl.sandbox.base import Sandbox, SandboxError
from nemo_gym_prorl.sandbox.launch import Launch
from nemo_gym_prorl.sandbox.limits import pid_alive
from nemo_gym_prorl.sandbox.spec import SandboxSpec

logger = logging.getLogger(__name__)

INSTANCE_PREFIX = "prorl-"
_START_TIMEOUT_S = 300.0  # first start of a large .sif can unpack for minutes on a slow FS
_STOP_TIMEOUT_S = 60.0


def find_apptainer() -> str | None:
    return shutil.which("apptainer") or shutil.which("singularity")


def instance_name(owner_pid: int, sandbox_id: str) -> str:
    return f"{INSTANCE_PREFIX}{owner_pid}-{sandbox_id}"


def owner_of(name: str) -> int | None:
    if not name.startswith(INSTANCE_PREFIX):
        return None
    pid, _, _ = name[len(INSTANCE_PREFIX) :].partition("-")
    return int(pid) if pid.isdigit() else None


class ApptainerSandbox(Sandbox):
    backend = "apptainer"

    def __init__(self, spec: SandboxSpec) -> None:
        binary = find_apptainer()
        if binary is None:
            raise SandboxError("neither `apptainer` nor `singularity` is on PATH (use backend=bubblewrap)")
        if spec.image is None:
            raise SandboxError("the apptainer backend needs `image`: a .sif file or a sandbox directory")
        if not Path(spec.image).exists():
            raise SandboxError(f"apptainer image not found: {spec.image}")
        if spec.fakeroot and os.geteuid() == 0:
            raise SandboxError("fakeroot is refused for a root service: its sandboxes never run as root")
        self._binary = binary
        super().__init__(spec)
        self.instance = instance_name(os.getpid(), self.id)
        self._start_instance()

    def _drop(self) -> list[str]:
        """A root service starts Apptainer as the sandboxes' unprivileged identity (its user
        namespace mode), never as root."""
        return self.identity.setpriv() if self.identity is not None else []

    def start_command(self) -> list[str]:
        cmd = [
            *self._drop(),
            self._binary,
            "instance",
            "start",
            "--containall",
            "--no-home",
            "--writable-tmpfs",
        ]
        if not self.spec.network:
            cmd += ["--net", "--network", "none"]
        if self.spec.fakeroot:
            cmd.append("--fakeroot")
        cmd += ["--bind", f"{self.workspace}:{self.spec.workspace_mount}:rw"]
        cmd += ["--bind", f"{self.tmp_dir}:/tmp:rw"]
        binds = [(path, str(path)) for path in self.spec.ro_binds] + self.python_setup.binds
        for source, target in binds:
            cmd += ["--bind", f"{source}:{target}:ro"]
        for hidden in self.spec.hidden_dirs:  # an empty directory over each
            cmd += ["--bind", f"{self.empty_dir()}:{hidden}:ro"]
        cmd += [str(self.spec.image), self.instance]
        return cmd

    def stop_command(self) -> list[str]:
        return [*self._drop(), self._binary, "instance", "stop", self.instance]

    def _start_instance(self) -> None:
        try:
            done = subprocess.run(
                self.start_command(), capture_output=True, text=True, timeout=_START_TIMEOUT_S, check=False
            )
        except subprocess.TimeoutExpired as exc:
            self.close()
            raise SandboxError(f"apptainer instance start timed out after {_START_TIMEOUT_S:.0f}s") from exc
        if done.returncode != 0:
            self.close()
            raise SandboxError(f"apptainer instance start failed ({done.returncode}): {done.stderr.strip()}")

    def _isolate(self, argv: list[str], *, cwd: str, env: dict[str, str]) -> Launch:
        # --no-privs: no capability for the command, even as the container's (fake)root.
        cmd = [*self._drop(), self._binary, "exec", "--no-privs", "--cleanenv", "--pwd", cwd]
        for key, value in env.items():
            cmd += ["--env", f"{key}={value}"]
        return Launch([*cmd, f"instance://{self.instance}", *argv])

    def _teardown_backend(self) -> None:
        if not hasattr(self, "instance"):
            return  # failed before the instance was named: nothing was started
        try:
            subprocess.run(self.stop_command(), capture_output=True, timeout=_STOP_TIMEOUT_S, check=False)
        except (subprocess.TimeoutExpired, OSError) as exc:
            logger.warning("could not stop apptainer instance %s: %s", self.instance, exc)


def reap_orphan_instances(binary: str | None = None) -> list[str]:
    """Stop instances this project started for owners that no longer exist; return their names."""
    binary = binary or find_apptainer()
    if binary is None:
        return []
    listing = subprocess.run(
        [binary, "instance", "list", "--json"], capture_output=True, text=True, timeout=60, check=False
    )
    if listing.returncode != 0:
        return []
    try:
        instances = json.loads(listing.stdout or "{}").get("instances", [])
    except json.JSONDecodeError:
        return []
    stopped: list[str] = []
    for inst in instances:
        name = inst.get("instance", "")
        owner = owner_of(name)
        if owner is not None and not pid_alive(owner):
            subprocess.run([binary, "instance", "stop", name], capture_output=True, timeout=60, check=False)
            stopped.append(name)
    return stopped
