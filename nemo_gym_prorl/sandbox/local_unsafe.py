# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""`local_unsafe`: runs processes directly on the host, in the workspace directory.

UNSAFE: no isolation of any kind (files, network, processes). It exists to debug tools and
tasks on machines without bubblewrap or Apptainer; never point a policy under training at it.
Processes still get their own process group, limits and cleanup. A root service refuses it:
with no isolation there is nothing between the policy's code and the host's root.
"""

from __future__ import annotations

import os
from pathlib import PurePosixPath

from nemo_gym_prorl.sandbox.base import Sandbox, SandboxError
from nemo_gym_prorl.sandbox.launch import Launch
from nemo_gym_prorl.sandbox.spec import SandboxSpec


class UnsafeLocalSandbox(Sandbox):
    backend = "local_unsafe"

    def __init__(self, spec: SandboxSpec) -> None:
        if os.geteuid() == 0:
            raise SandboxError(
                "local_unsafe runs the policy's code on the host unconfined and is refused for a root "
                "service: use bubblewrap (the default) or run the service as an unprivileged user"
            )
        super().__init__(spec)

    def _isolate(self, argv: list[str], *, cwd: str, env: dict[str, str]) -> Launch:
        # Paths inside are the workspace mount; here they must be the real host workspace.
        host_cwd = str(self.host_path(cwd)) if PurePosixPath(cwd).is_absolute() else str(self.workspace / cwd)
        host_env = {**env, "HOME": str(self.workspace), "TMPDIR": str(self.tmp_dir)}
        return Launch(["/usr/bin/env", "-i", *[f"{k}={v}" for k, v in host_env.items()], "/bin/sh",
                       "-c", 'cd "$0" && exec "$@"', host_cwd, *argv])  # fmt: skip
