# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Simulated LLM backends for the balancer benchmark: real HTTP servers with service times.

Each backend is an asyncio HTTP/1.1 server (no framework, so the servers' own overhead is
small and identical for every policy) that models what makes balancing matter on real vLLM:
- speed: a per-backend slowdown factor (1x, 1x, 2x, 4x in the benchmark);
- batching: up to `batch_knee` requests run at full speed, beyond that all slow down
  proportionally (continuous batching saturates);
- prefix cache: a turn whose trajectory's previous turn ran on the same backend prefills only
  its new tokens; otherwise the whole prompt is prefilled again.
It also serves a minimal vLLM-like `/tokenize` and `/v1/completions` (ChatML over bytes) so
the token session's client-side overhead can be measured against a direct call.

The servers run in a child process, so their CPU time does not steal from the client's.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import multiprocessing.connection
import os
from collections import OrderedDict
from typing import Any

from pydantic import BaseModel

IM_START, IM_END = 1, 2


class SimBackendSpec(BaseModel):
    slowdown: float = 1.0
    batch_knee: int = 4
    prefill_ms_per_token: float = 0.02
    decode_ms_per_token: float = 0.35
    cache_trajectories: int = 256

    def build(self) -> _Backend:
        return _Backend(self)


def _chatml_ids(messages: list[dict[str, Any]], add_generation_prompt: bool) -> list[int]:
    ids: list[int] = []
    for m in messages:
        ids += [IM_START, *f"{m['role']}\n{m.get('content') or ''}".encode(), IM_END, 10]
    if add_generation_prompt:
        ids += [IM_START, *b"assistant\n"]
    return ids


class _Backend:
    def __init__(self, spec: SimBackendSpec) -> None:
        self.spec = spec
        self.active = 0
        self.cache: OrderedDict[str, None] = OrderedDict()  # LRU of trajectories with a warm prefix

    def service_s(self, body: dict[str, Any]) -> float:
        trajectory = str(body.get("trajectory", ""))
        warm = trajectory in self.cache
        self.cache[trajectory] = None
        self.cache.move_to_end(trajectory)
        while len(self.cache) > self.spec.cache_trajectories:
            self.cache.popitem(last=False)
        prefill_tokens = int(body.get("new_tokens", 0)) if warm else int(body.get("prompt_tokens", 0))
        work_ms = (
            prefill_tokens * self.spec.prefill_ms_per_token
            + int(body.get("gen_tokens", 0)) * self.spec.decode_ms_per_token
        )
        load = max(1.0, self.active / self.spec.batch_knee)
        return work_ms * self.spec.slowdown * load / 1000.0

    async def respond(self, method: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
        if method == "POST" and path == "/generate":
            self.active += 1
            try:
                await asyncio.sleep(self.service_s(body))
            finally:
                self.active -= 1
            return {"ok": True}
        return self.answer(path, body)

    def answer(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        if path == "/tokenize":
            if "messages" in body:
                ids = _chatml_ids(body["messages"], bool(body.get("add_generation_prompt", True)))
            else:
                ids = list(str(body.get("prompt", "")).encode())
            return {"count": len(ids), "max_model_len": 1 << 20, "tokens": ids}
        if path == "/v1/completions":
            ids = [*b"ok", IM_END]
            return {
                "choices": [
                    {
                        "text": "ok",
                        "token_ids": ids,
                        "logprobs": {"token_logprobs": [-0.1] * len(ids)},
                        "finish_reason": "stop",
                        "prompt_token_ids": body.get("prompt"),
                    }
                ]
            }
        return {"ok": True}


async def _handle(backend: Any, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """HTTP/1.1 keep-alive, JSON in and out; `backend.respond(method, path, body)` answers."""
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, path, _ = lines[0].split(" ", 2)
            length = 0
            for line in lines[1:]:
                if line.lower().startswith("content-length:"):
                    length = int(line.split(":", 1)[1])
            body = json.loads(await reader.readexactly(length)) if length else {}
            payload = json.dumps(await backend.respond(method, path, body)).encode()
            writer.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
                + str(len(payload)).encode()
                + b"\r\n\r\n"
                + payload
            )
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def _serve(specs: list[Any], conn: multiprocessing.connection.Connection) -> None:
    servers = []
    for spec in specs:
        backend = spec.build()
        server = await asyncio.start_server(
            lambda r, w, b=backend: _handle(b, r, w), "127.0.0.1", 0, backlog=4096
        )
        servers.append(server)
    conn.send([s.sockets[0].getsockname()[1] for s in servers])
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, conn.recv)  # any message (or the parent's exit) stops us


def _child(specs: list[Any], conn: multiprocessing.connection.Connection, niceness: int) -> None:
    if niceness:
        os.nice(niceness)
    try:
        asyncio.run(_serve(specs, conn))
    except (EOFError, KeyboardInterrupt):
        pass


class SimulatedBackends:
    """`with SimulatedBackends([spec, ...]) as urls:` -> one base URL per backend. A spec is any
    picklable model with `build()` -> an object with `async respond(method, path, body)`."""

    def __init__(self, specs: list[Any], *, niceness: int = 0) -> None:
        self.specs = specs
        # On a machine that also runs what is measured, a simulated backend (a GPU server in
        # real life) can yield the CPU to it.
        self.niceness = niceness
        self._proc: multiprocessing.process.BaseProcess | None = None
        self._conn: multiprocessing.connection.Connection | None = None

    def __enter__(self) -> list[str]:
        ctx = multiprocessing.get_context("spawn")  # no inherited event loop or threads
        parent, child = ctx.Pipe()
        self._proc = ctx.Process(target=_child, args=(self.specs, child, self.niceness), daemon=True)
        self._proc.start()
        self._conn = parent
        if not parent.poll(60):
            self.__exit__()
            raise RuntimeError("simulated backends did not start")
        return [f"http://127.0.0.1:{port}" for port in parent.recv()]

    def __exit__(self, *exc: object) -> None:
        if self._conn is not None:
            try:
                self._conn.send("stop")
            except (BrokenPipeError, OSError):
                pass
        if self._proc is not None:
            self._proc.join(5)
            if self._proc.is_alive():
                self._proc.kill()
                self._proc.join(5)
        self._proc = self._conn = None
