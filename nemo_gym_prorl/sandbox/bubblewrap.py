# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The default, rootless backend: bubblewrap (`bwrap`).

Filesystem inside: a fresh tmpfs root holding read-only binds of the system directories (the
host's, or those of a rootfs directory given as `image`), the sandbox Python runtime
(read-only at /opt/prorl-runtime; see runtime.py), the workspace (read-write) at `workspace_mount`, a per-sandbox /tmp, and fresh
/proc and /dev. Nothing else of the host is visible: not /home, /root, /work, nor the host's
/tmp, nor the host's third-party Python package trees. All namespaces are unshared (loopback-only network unless `network=True`), and the
sandbox dies with the process that started it.
"""

from __future__ import annotations

import glob
import os
from pathlib import Path

from nemo_gym_prorl.sandbox.base import Sandbox, SandboxError
from nemo_gym_prorl.sandbox.launch import (
    Launch,
    bwrap_launch,
    find_bwrap,
    namespace_options,
    with_parent_dirs,
)
from nemo_gym_prorl.sandbox.spec import SandboxSpec

# Top-level host directories that make up "the system" (programs, libraries, config).
SYSTEM_DIRS = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc")
# Top-level entries of a rootfs that must not be bound from it: the sandbox provides its own.
_PROVIDED = {"proc", "dev", "tmp", "sys", "run"}
# Host secrets a sandbox never needs, hidden even though /etc is visible.
SECRET_FILES = ("/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-", "/etc/sudoers")
SECRET_DIRS = ("/etc/ssh", "/etc/sudoers.d", "/etc/ssl/private")
# Third-party package trees of the host, hidden too: the sandbox runtime does not use them, and
# they vendor the very projects tasks are built from (setuptools vendors more_itertools, the
# Google Cloud SDK vendors inflection): an upstream copy of a SWE task's project is its answer.
THIRD_PARTY_GLOBS = (
    "/usr/lib/python3/dist-packages",
    "/usr/lib/python3*/site-packages",
    "/usr/local/lib/python3*/dist-packages",
    "/usr/local/lib/python3*/site-packages",
    "/usr/share/python-wheels",
    "/usr/lib/google-cloud-sdk",
)


def _has_setpriv(rootfs: Path) -> bool:
    return any(os.path.lexists(rootfs / d / "setpriv") for d in ("usr/bin", "bin", "usr/sbin", "sbin"))


class BubblewrapSandbox(Sandbox):
    backend = "bubblewrap"

    def __init__(self, spec: SandboxSpec) -> None:
        bwrap = find_bwrap()
        if bwrap is None:
            raise SandboxError(
                "bubblewrap is not installed: 'apt-get install bubblewrap' (or use backend=apptainer)"
            )
        if spec.image is not None and not Path(spec.image).is_dir():
            raise SandboxError(f"bubblewrap image must be a rootfs directory; {spec.image!r} is not one")
        self._bwrap = bwrap
        super().__init__(spec)
        if self.identity is not None and spec.image is not None and not _has_setpriv(Path(spec.image)):
            self.close()
            raise SandboxError(
                f"the rootfs {spec.image} has no setpriv (util-linux): a root service starts every "
                "sandbox's command through it to drop root; add util-linux to the image"
            )
        # The filesystem part never changes for a sandbox: build it once, not per process.
        self._fs_args = self._filesystem_args()

    def _root_entries(self) -> list[tuple[str, Path]]:
        """(name, host path) of each top-level directory to show read-only at /name."""
        if self.spec.image is None:
            return [(name, Path("/") / name) for name in SYSTEM_DIRS if (Path("/") / name).exists()]
        root = Path(self.spec.image)
        return [(e.name, e) for e in sorted(root.iterdir()) if e.name not in _PROVIDED]

    def _filesystem_args(self) -> list[str]:
        # Order matters: a later mount covers an earlier one. /tmp comes first so that host paths
        # under /tmp that must stay visible (a venv in a CI checkout under /tmp, say) are bound
        # on top of it rather than hidden by it.
        args: list[str] = ["--proc", "/proc", "--dev", "/dev", "--bind", str(self.tmp_dir), "/tmp"]
        for name, host in self._root_entries():
            if host.is_symlink():  # merged-/usr layouts: /bin -> usr/bin
                args += ["--symlink", os.readlink(host), f"/{name}"]
            elif host.is_dir():
                args += ["--ro-bind", str(host), f"/{name}"]
        if self.spec.image is None:
            for secret in SECRET_FILES:
                if os.path.lexists(secret):
                    args += ["--ro-bind", "/dev/null", secret]
            hidden = [*SECRET_DIRS, *(d for pattern in THIRD_PARTY_GLOBS for d in sorted(glob.glob(pattern)))]
            for hidden_dir in hidden:
                if os.path.isdir(hidden_dir) and not os.path.islink(hidden_dir):
                    args += ["--tmpfs", hidden_dir]
        binds = [(path, str(path)) for path in self.spec.ro_binds] + self.python_setup.binds
        for source, target in binds:
            args += ["--ro-bind", str(source), str(target)]
        args += ["--bind", str(self.workspace), self.spec.workspace_mount]
        for hidden in self.spec.hidden_dirs:  # last, so that they cover whatever bind holds them
            args += ["--tmpfs", hidden]
        return with_parent_dirs(args)

    def _isolate(self, argv: list[str], *, cwd: str, env: dict[str, str]) -> Launch:
        options = [*namespace_options(self.identity, network=self.spec.network), "--die-with-parent",
                   "--hostname", "sandbox"]  # fmt: skip
        return bwrap_launch(self._bwrap, argv, options=options, fs_args=self._fs_args, env=env, cwd=cwd,
                            identity=self.identity)  # fmt: skip
