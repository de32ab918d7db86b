# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Every route of a vLLM server but `/health` answers only a request bearing its key.

vLLM's own `--api-key` guards only paths under /v1, /v2, /inference and /cohere: generation at
`/invocations`, `/tokenize`, and in development mode `/collective_rpc` (arbitrary calls on the
engine's workers), `/sleep`, `/reset_prefix_cache` and the rest stay open to any local process.
A policy's harness shares the host's loopback, so the server the service owns must answer the
service alone. Loaded with `--middleware prorl_key_guard.RequireKey`; the key is VLLM_API_KEY, as
vLLM's own check reads it (both then apply under /v1). Without a key it refuses to start.

Standard library only: it runs in vLLM's interpreter, not the project's.
"""

from __future__ import annotations

import hmac
import os
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

KEY_ENV = "VLLM_API_KEY"
# Liveness only: it says the server is up, nothing more (health probes send no key).
OPEN_PATHS = frozenset({"/health"})
_REFUSAL = b'{"error": "Unauthorized"}'


class RequireKey:
    """ASGI middleware: 401 for any HTTP request (and a closed handshake for any websocket)
    without `Authorization: Bearer <VLLM_API_KEY>`, except a GET of an open path."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        key = os.environ.get(KEY_ENV, "")
        if not key:
            raise RuntimeError(f"prorl_key_guard: {KEY_ENV} is not set; the server would be open to anyone")
        self._expected = f"Bearer {key}".encode()

    def _allowed(self, scope: Scope) -> bool:
        path = scope["path"].removeprefix(scope.get("root_path", ""))
        if scope["type"] == "http" and scope.get("method") in ("GET", "HEAD") and path in OPEN_PATHS:
            return True
        given = next(
            (value for name, value in scope.get("headers", ()) if name.lower() == b"authorization"), b""
        )
        return hmac.compare_digest(given, self._expected)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or self._allowed(scope):
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})  # before accept: the handshake fails
            return
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(_REFUSAL)).encode()),
            (b"www-authenticate", b"Bearer"),
        ]
        await send({"type": "http.response.start", "status": 401, "headers": headers})
        await send({"type": "http.response.body", "body": _REFUSAL})
