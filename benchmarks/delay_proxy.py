# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""A TCP proxy that puts a slow, unreliable link between a client and a server, for benchmarks.

Every byte is delayed by half the round trip in each direction (order kept, throughput not
limited), so a request and its answer cost one round trip more than on loopback, as across a
network. `cut_every`: every n-th HTTP answer (over all connections; a client keeps its connection
alive, so counting connections would cut nothing) is reset, as a dropped link would: a stream
after a few of its chunks went through, any other answer halfway through its first bytes (the
client has sent its request and gets neither the answer nor a status). A proxy, not `tc netem`: netem's qdisc is not in this machine's kernel, and a
proxy needs no privileges; it cannot lose single packets (TCP would resend them), so a cut
connection stands for loss.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

STREAM_CHUNKS_BEFORE_CUT = 3


@dataclass
class DelayProxy:
    target_host: str
    target_port: int
    rtt_s: float = 0.0
    cut_every: int = 0  # 0: never cut
    connections: int = 0
    answers: int = 0
    cut: int = 0
    _server: asyncio.Server | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.sockets[0].getsockname()[:2]
        return f"http://{host}:{port}"

    async def _pipe(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, answers: bool
    ) -> None:
        """Copy `reader` to `writer`, each chunk sent `rtt_s / 2` after it arrived; `answers`: the
        server's side, where every `cut_every`-th answer is cut."""
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def read() -> None:
            while chunk := await reader.read(65536):
                queue.put_nowait((time.monotonic() + self.rtt_s / 2, chunk))
            queue.put_nowait((time.monotonic() + self.rtt_s / 2, b""))

        reading = asyncio.create_task(read())
        chunks_before_cut: int | None = None  # counting down through an answer chosen to be cut
        try:
            while True:
                due, chunk = await queue.get()
                await asyncio.sleep(max(0.0, due - time.monotonic()))
                if not chunk:
                    break
                # An answer starts a chunk: a client sends its next request only after the last
                # answer, and a stream's later chunks never start with the status line.
                if answers and chunk.startswith(b"HTTP/"):
                    self.answers += 1
                    if self.cut_every and self.answers % self.cut_every == 0:
                        # A stream is cut after some of its results went through; any other
                        # answer halfway through its first bytes.
                        head = chunk.split(b"\r\n\r\n", 1)[0].lower()
                        chunks_before_cut = STREAM_CHUNKS_BEFORE_CUT if b"chunked" in head else 0
                if chunks_before_cut == 0:
                    self.cut += 1
                    writer.write(chunk[: len(chunk) // 2])
                    await writer.drain()
                    writer.transport.abort()  # a reset mid-answer
                    return
                if chunks_before_cut is not None:
                    chunks_before_cut -= 1
                writer.write(chunk)
                await writer.drain()
        finally:
            reading.cancel()
            with contextlib.suppress(Exception):
                writer.close()

    async def _handle(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            server_reader, server_writer = await asyncio.open_connection(self.target_host, self.target_port)
        except OSError:
            client_writer.close()
            return
        with contextlib.suppress(ConnectionError, asyncio.CancelledError):
            await asyncio.gather(
                self._pipe(client_reader, server_writer, answers=False),
                self._pipe(server_reader, client_writer, answers=True),
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
