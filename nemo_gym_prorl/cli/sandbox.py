# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""`prorl sandbox setup` and `prorl sandbox check`: the CLI face of `nemo_gym_prorl.sandbox.runtime`.

Registered by the main CLI through `add_sandbox_parser(subparsers)`; a subcommand's `func` gets
the parsed arguments and gives back the process's exit code.
"""

from __future__ import annotations

import argparse
import asyncio

from nemo_gym_prorl.cli.failure import failed
from nemo_gym_prorl.cli.parsers import add_group_with_setup
from nemo_gym_prorl.sandbox import SandboxError, SandboxSpec, open_sandbox
from nemo_gym_prorl.sandbox.identity import SandboxIdentityError, sandbox_identity
from nemo_gym_prorl.sandbox.runtime import (
    FORBIDDEN_MODULES,
    RuntimeSetupError,
    installed_runtime,
    setup_runtime,
)


def _say(message: str) -> None:
    print(f"[sandbox] {message}", flush=True)


def add_sandbox_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    sandbox, sub = add_group_with_setup(subparsers, "sandbox", help="the sandboxes' own Python runtime", setup=(
        cmd_sandbox_setup,
        "build the minimal Python runtime sandboxes run (pinned lock, no graders; idempotent)",
        "rebuild even if it is already built",
    ))  # fmt: skip
    p_check = sub.add_parser("check", help="open a sandbox and show what its Python can and cannot import")
    p_check.set_defaults(func=cmd_sandbox_check)
    return sandbox


def cmd_sandbox_setup(args: argparse.Namespace) -> int:
    try:
        runtime = setup_runtime(force=bool(args.force), say=_say)
        identity = sandbox_identity()  # a root service's: made here, at set-up, if missing
    except (RuntimeSetupError, SandboxIdentityError) as exc:
        return failed("sandbox setup", exc, 1)
    _say(f"runtime: Python {runtime.python_version} at {runtime.host_dir} (inside: {runtime.python})")
    if identity is not None:
        _say(f"sandboxes run as {identity.name} (uid {identity.uid}, gid {identity.gid}), never as root")
    return 0


_CHECK = (
    "import importlib.util as u, sys; print(sys.executable); "
    f"[print(m, 'importable' if u.find_spec(m) else 'absent') for m in {list(FORBIDDEN_MODULES)}]"
)


async def _check() -> int:
    with open_sandbox(SandboxSpec()) as sandbox:
        result = await sandbox.exec([sandbox.python, "-I", "-c", _CHECK], timeout=60)
    print(result.stdout + result.stderr, end="")
    return 0 if result.ok and "importable" not in result.stdout else 1


def cmd_sandbox_check(args: argparse.Namespace) -> int:
    try:
        installed_runtime()
        return asyncio.run(_check())
    except (RuntimeSetupError, SandboxError) as exc:
        return failed("sandbox check", exc, 1)
