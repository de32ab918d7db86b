# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The sandbox suites again, as a service run by an unprivileged user would run them.

CI and these machines run the tests as root, where sandboxes take the dedicated identity. Users
on clusters run the service as themselves. This test runs the privilege probes of every kind,
the harness's confinement, the sandboxes' own behaviour, the PTY shell and the local backend
(which a root service refuses) in a pytest of their own, as an unprivileged uid (`support.unprivileged`: it
reaches the interpreter, venv, checkout and sandbox runtime through a mount namespace of its
own; nothing of the host changes). Every test there must pass; none may be skipped for lack of
privileges.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from nemo_gym_prorl.sandbox.runtime import prorl_home, runtime_root

TESTS = Path(__file__).resolve().parents[1]
CHECKOUT = TESTS.parent
UNPRIVILEGED_UID = 64123  # no user of the machine's: a bare number needs no passwd entry
MODULES = [
    "tests/security/test_privileges.py",
    "tests/agent/harness/test_harness_confinement.py",
    "tests/sandbox/test_bubblewrap.py",
    "tests/sandbox/test_persistent_bubblewrap.py",
    "tests/sandbox/test_local_unsafe.py",
    "tests/tools/test_pty_shell.py",
    "tests/tools/test_ipython_kernel.py",
    "tests/sandbox/test_terminal.py",
    "tests/sandbox/test_cpu_priority.py",
]

pytestmark = [
    pytest.mark.bwrap,
    pytest.mark.skipif(
        os.geteuid() != 0, reason="this session is unprivileged already: the suites ran as it"
    ),
]


def test_the_sandbox_suites_pass_for_an_unprivileged_service() -> None:
    with tempfile.TemporaryDirectory(prefix="prorl-unprivileged-") as scratch:
        root = Path(scratch)
        root.chmod(0o755)
        for name in ("home", "sandboxes", "tmp", "pytest"):
            (root / name).mkdir()
            os.chown(root / name, UNPRIVILEGED_UID, UNPRIVILEGED_UID)
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(root / "home"),
            "TMPDIR": str(root / "tmp"),
            "PRORL_HOME": str(prorl_home()),
            "PRORL_SANDBOX_ROOT": str(root / "sandboxes"),
            "PYTHONDONTWRITEBYTECODE": "1",
            "OMP_NUM_THREADS": "1",
            "LANG": "C.UTF-8",
        }
        # The runtime, not PRORL_HOME itself: CI's is a `mktemp -d`, which no other user may enter.
        reach = [Path(sys.base_prefix), Path(sys.prefix), CHECKOUT, runtime_root()]
        command = [sys.executable, "-m", "support.unprivileged", "--uid", str(UNPRIVILEGED_UID)]
        for path in reach:
            command += ["--reach", str(path.resolve())]
        command += ["--", sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                    "-rs", f"--basetemp={root / 'pytest' / 'base'}", *MODULES]  # fmt: skip
        done = subprocess.run(
            command, cwd=CHECKOUT, env={**env, "PYTHONPATH": str(TESTS)}, capture_output=True, text=True,
            timeout=900, check=False,
        )  # fmt: skip
    summary = done.stdout[-4000:] + done.stderr[-2000:]
    assert done.returncode == 0, summary
    assert " passed" in done.stdout and " failed" not in done.stdout, summary
    # Skips a root session takes (local_unsafe's refusal, fakeroot's) are the only ones allowed.
    skipped = [line for line in done.stdout.splitlines() if line.startswith("SKIPPED")]
    assert all("root service" in line for line in skipped), skipped
