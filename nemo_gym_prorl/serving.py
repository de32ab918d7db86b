# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Serve an app over HTTP (uvicorn) for as long as a block runs: `prorl serve` serves until a
signal, `prorl train` while it trains, a harness rollout's recording endpoint while harnesses run. The server is up, with its real address known, before the
block starts; leaving the block stops it (the app's shutdown closes the stack it serves)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any


@dataclass
class Served:
    url: str
    server: Any  # uvicorn.Server
    task: asyncio.Task[None]

    async def wait(self) -> None:
        """Until the server stops (SIGINT/SIGTERM: uvicorn handles them)."""
        await self.task


GRACEFUL_S = 5.0  # seconds a request still being answered gets once the server is stopping


@asynccontextmanager
async def serving(
    app: Any,
    *,
    host: str,
    port: int,
    log_level: str = "warning",
    handle_signals: bool = True,
    graceful_s: float = GRACEFUL_S,
    uds: str | None = None,
) -> AsyncIterator[Served]:
    """`handle_signals=False` for a server inside a larger program (`prorl train`): uvicorn then
    leaves SIGINT and SIGTERM to that program, which stops its work and this server with it.
    By default uvicorn takes them and stops serving (`prorl serve`).

    On the way out, requests still being answered get `graceful_s` to finish, then are
    cancelled: a request waiting for rollouts (a stream of results, a wait) would otherwise hold
    the shutdown until every queued rollout had run, since the pipeline stops after the server.

    `uds`: serve on that Unix socket instead of `host:port` (the URL is then `unix:<path>`)."""
    import uvicorn

    class EmbeddedServer(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

    server = (uvicorn.Server if handle_signals else EmbeddedServer)(
        uvicorn.Config(
            app,
            host=host,
            port=port,
            log_level=log_level,
            lifespan="on",
            access_log=log_level in ("debug", "trace"),
            timeout_graceful_shutdown=graceful_s,
            uds=uds,
        )
    )
    task = asyncio.create_task(server.serve())
    # uvicorn exposes readiness only as a flag: poll it briefly.
    while not server.started and not task.done():  # noqa: ASYNC110
        await asyncio.sleep(0.02)
    if not server.started:
        await task  # raises the reason it did not start, if it has one
        raise RuntimeError(f"the HTTP server did not start on {host}:{port}")
    if uds is not None:
        url = f"unix:{uds}"
    else:
        bound_host, bound_port = server.servers[0].sockets[0].getsockname()[:2]
        url = f"http://{bound_host}:{bound_port}"
    try:
        yield Served(url=url, server=server, task=task)
    finally:
        server.should_exit = True
        await task
