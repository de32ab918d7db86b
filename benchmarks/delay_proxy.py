# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""A TCP proxy that puts a slow, unreliable link between a client and a server, for benchmarks.

Every byte is delayed by half the round trip in each direction (order kept, throughput not
limited), so a request and its answer cost one round trip more than on loopback, as across a
network. `cut_every`: every n-th connection is reset after its first bytes from the server, as a
dropped link would. A proxy, not `tc netem`: netem's qdisc is not in this machine's kernel, and a
proxy needs no privileges; it cannot lose single packets (TCP would resend them), so a cut
connection stands for loss.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field


@dataclass
class DelayProxy:
    target_host: str
    target_port: int
    rtt_s: float = 0.0
    cut_every: int = 0  # 0: never cut
    connections: int = 0
    cut: int = 0
    _server: asyncio.Server | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.sockets[0].getsockname()[:2]
        return f"http://{host}:{port}"

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, cut: bool) -> None:
        """Copy `reader` to `writer`, each chunk sent `rtt_s / 2` after it arrived."""
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def read() -> None:
            while chunk := await reader.read(65536):
                queue.put_nowait((time.monotonic() + self.rtt_s / 2, chunk))
            queue.put_nowait((time.monotonic() + self.rtt_s / 2, b""))

        reading = asyncio.create_task(read())
        try:
            while True:
                due, chunk = await queue.get()
                await asyncio.sleep(max(0.0, due - time.monotonic()))
                if not chunk:
                    break
                writer.write(chunk)
                await writer.drain()
                if cut:
                    self.cut += 1
                    writer.transport.abort()  # a reset mid-answer
                    return
        finally:
            reading.cancel()
            with contextlib.suppress(Exception):
                writer.close()

    async def _handle(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        cut = self.cut_every > 0 and self.connections % self.cut_every == 0
        try:
            server_reader, server_writer = await asyncio.open_connection(self.target_host, self.target_port)
        except OSError:
            client_writer.close()
            return
        with contextlib.suppress(ConnectionError, asyncio.CancelledError):
            await asyncio.gather(
                self._pipe(client_reader, server_writer, cut=False),
                self._pipe(server_reader, client_writer, cut=cut),
            )

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[DelayProxy]:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        try:
            yield self
        finally:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 5)
