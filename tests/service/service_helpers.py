# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Helpers for the service tests (a uniquely named module: several test dirs have a conftest)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import uvicorn
from support.scripted_stages import ScriptedHandler

from nemo_gym_prorl.llm import LLMBackendPool, PoolConfig
from nemo_gym_prorl.pipeline import HandlerRegistry, Pipeline, PipelineConfig
from nemo_gym_prorl.service import PoolBackendRegistry, RolloutService, ServiceOptions, create_app

TOKEN = "s3cret-token-for-tests"


def make_service(
    handler: ScriptedHandler | None = None, *, service: dict[str, Any] | None = None, **pipeline: Any
) -> tuple[RolloutService, ScriptedHandler]:
    handler = handler or ScriptedHandler()
    registry = HandlerRegistry()
    registry.register("s", handler)
    pipeline.setdefault("deadline_check_s", 0.05)
    options = ServiceOptions(**{"require_backend": False, **(service or {})})
    svc = RolloutService(
        Pipeline(registry, PipelineConfig(**pipeline)),
        PoolBackendRegistry(LLMBackendPool(PoolConfig(health_path=None))),
        options,
    )
    return svc, handler


class Api:
    """An httpx client on the app (ASGI, no socket) plus the objects behind it."""

    def __init__(self, http: httpx.AsyncClient, service: RolloutService, handler: ScriptedHandler) -> None:
        self.http, self.service, self.handler = http, service, handler


MakeApi = Callable[..., Any]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def live_server(svc: RolloutService, *, token: str | None = None) -> Iterator[str]:
    """The app on a real socket, served by uvicorn in a thread with its own event loop."""
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(create_app(svc, token=token), host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=lambda: asyncio.run(server.serve()), daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "server did not start"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=15)


async def until(predicate: Callable[[], Any], timeout: float = 10.0) -> None:
    """Poll `predicate` (sync or async) until true; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.01)
