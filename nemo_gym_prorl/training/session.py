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


@dataclass
class TrainingService:
    url: str
    token: str
    backend_url: str
    client: AsyncRolloutClient


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


async def start_backend(
    config: TrainConfig, stack: AsyncExitStack, layout: EmbeddedLayout, say: Callable[[str], None]
) -> str:
    """The backend's OpenAI base URL: the configured one, serving the base model again, or a
    server started for this run (stopped with the stack)."""
    if config.backend.url is not None:
        address = normalize_base_url(config.backend.url)
        say(f"using the running backend {address}: restoring its base weights")
        async with httpx.AsyncClient() as client:
            try:
                await restore_launch_weights(
                    client,
                    address,
                    served_name=MODEL_NAME,
                    weights_path=str(layout.model_dir),
                    timeout_s=config.backend.ready_timeout_s,
                )
            except PolicyError as exc:
                raise ServerStartError(
                    f"{exc} (start it with `prorl model serve --train-config <this run's config>`)"
                ) from None
        return address + "/v1"
    backend = config.backend
    say(f"starting vLLM-CPU ({backend.dtype}, LoRA rank <= {backend.lora.max_lora_rank})")
    server = VLLMServer(backend_spec(config, layout), ready_timeout_s=backend.ready_timeout_s)
    stack.callback(server.stop)
    await asyncio.to_thread(server.__enter__)
    say(f"backend {server.base_url} (log {server.log_path})")
    return server.base_url


async def start_service(
    config: TrainConfig,
    stack: AsyncExitStack,
    *,
    layout: EmbeddedLayout | None = None,
    say: Callable[[str], None] = print,
) -> TrainingService:
    layout = layout or EmbeddedLayout.default()
    token = secrets.token_hex(16)
    backend_url = await start_backend(config, stack, layout, say)
    serve_config = load_config(
        [
            *config.service_overrides,
            f"llm.backends=[{backend_url}]",
            f"llm.tool_prompt={config.tool_prompt}",
            f"+pipeline.staleness.max_staleness={config.max_staleness}",
            f"auth.token={token}",
        ]
    )
    rollout_stack = stack_from_config(serve_config)
    stack.push_async_callback(rollout_stack.close)
    await rollout_stack.start()
    served = await stack.enter_async_context(
        serving(rollout_stack.app(token=token), host="127.0.0.1", port=0, handle_signals=False)
    )
    client = AsyncRolloutClient(served.url, token=token, timeout=120)
    stack.push_async_callback(client.aclose)
    say(f"service at {served.url}")
    return TrainingService(url=served.url, token=token, backend_url=backend_url, client=client)
