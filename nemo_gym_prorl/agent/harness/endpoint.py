# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The recording model endpoint: each harness rollout gets its own OpenAI-compatible base URL.

    endpoint = await RecordingEndpoint().start()           # one per process, on loopback
    with endpoint.opened(RecordingSession(llm, sampling=...), commands) as door:
        run_harness(base_url=door.base_url, api_key=door.token)   # any OpenAI client
    record = door.session.record()                         # token-exact segments

`<base_url>/chat/completions` (streaming or not) and `<base_url>/models` answer with the
rollout's token only: every other path, another rollout's path, and this rollout's path once it
has ended are 404; a wrong token is 401. Calls of one rollout are answered one at a time, in
order (a harness is one conversation). A door opened with the rollout's `SandboxCommands` also
runs the harness's commands: `POST <commands_url>` (`/rollouts/<key>/commands`, same token, same
404 and 401) with `{command, cwd, timeout_s}` answers the sandbox's `ExecResult`
(`{stdout, stderr, exit_code, timed_out, ...}`), recorded as a `ToolStep`; once the rollout's
time is up it is a 403. The server runs in the event loop that owns the backend pool; harnesses
run in processes of their own (or threads) and reach it over loopback HTTP, or, confined in a
network namespace of their own, over its Unix socket (`socket_path`), the one thing of the host's
network a confined harness is given (`door_relay`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from nemo_gym_prorl.agent.harness.base import CommandsClosed, SandboxCommands
from nemo_gym_prorl.llm.errors import InferenceError
from nemo_gym_prorl.llm.recording import BudgetExhausted, ChatRequest, RecordingRefusal, RecordingSession
from nemo_gym_prorl.llm.slot_wait import SlotWaitListener, current_listeners, listening_as
from nemo_gym_prorl.serving import Served, serving

ROUTE_PREFIX = "/rollouts"


@dataclass
class Door:
    """One rollout's way in: its base URL, its token, and the session recording it."""

    key: str
    token: str
    base_url: str
    session: RecordingSession
    commands: SandboxCommands | None = None  # the rollout's sandbox, when the door runs commands
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    # Whoever budgets the rollout's time, from the context that opened the door: a call waiting
    # for a model slot stops their clocks, as the service's own agent loop's calls do.
    slot_wait_listeners: tuple[SlotWaitListener, ...] = field(default_factory=current_listeners)

    @property
    def commands_url(self) -> str:
        return self.base_url.removesuffix("/v1") + "/commands"


class CommandRequest(BaseModel):
    """One command of a harness, for the rollout's sandbox."""

    model_config = ConfigDict(extra="forbid")

    command: str
    cwd: str | None = Field(None, description="None: the sandbox's workspace")
    timeout_s: float | None = Field(None, gt=0, description="None: the rollout's own limit (never more)")


def _error(status: int, message: str, kind: str) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": kind, "code": status}}, status_code=status)


def _stream(reply: dict[str, Any]) -> Iterator[str]:
    """A completed reply as the chunks of a streamed one: the whole message in one delta."""
    choice = reply["choices"][0]
    message = choice["message"]
    delta: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
    if message.get("tool_calls"):
        delta["tool_calls"] = [{"index": i, **call} for i, call in enumerate(message["tool_calls"])]
    head = {k: reply[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}
    chunks = [
        head | {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
        head
        | {
            "choices": [{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}],
            "usage": reply["usage"],
        },
    ]
    for chunk in chunks:
        yield f"data: {json.dumps(chunk)}\n\n"
    yield "data: [DONE]\n\n"


class RecordingEndpoint:
    """A loopback HTTP server answering every open rollout at `/rollouts/<key>/v1`."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host = host
        self.port = port
        self.doors: dict[str, Door] = {}
        self._stack: AsyncExitStack | None = None
        self._served: Served | None = None
        self._socket_dir: tempfile.TemporaryDirectory[str] | None = None
        self.app = self._build_app()

    @property
    def socket_path(self) -> Path:
        """The same doors on a Unix socket (in a directory of the service's alone; a confined
        harness gets the socket itself bound into its sandbox)."""
        if self._socket_dir is None:
            raise RuntimeError("the recording endpoint is not started")
        return Path(self._socket_dir.name) / "door.sock"

    @property
    def url(self) -> str:
        if self._served is None:
            raise RuntimeError("the recording endpoint is not started")
        return self._served.url

    async def start(self) -> RecordingEndpoint:
        if self._served is None:
            stack = AsyncExitStack()
            self._socket_dir = tempfile.TemporaryDirectory(prefix="prorl-door-", ignore_cleanup_errors=True)
            stack.callback(self._socket_dir.cleanup)
            self._served = await stack.enter_async_context(
                serving(self.app, host=self.host, port=self.port, handle_signals=False)
            )
            await stack.enter_async_context(
                serving(self.app, host=self.host, port=0, handle_signals=False, uds=str(self.socket_path))
            )
            # Any local user may connect: the socket is reachable only where it is bound (its
            # directory is 0700), and each door still wants its rollout's token.
            self.socket_path.chmod(0o666)
            self._stack = stack
        return self

    async def aclose(self) -> None:
        for door in list(self.doors.values()):
            door.session.close()
        self.doors.clear()
        if self._stack is not None:
            stack, self._stack, self._served = self._stack, None, None
            await stack.aclose()
            self._socket_dir = None

    async def __aenter__(self) -> RecordingEndpoint:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    @contextlib.contextmanager
    def opened(self, session: RecordingSession, commands: SandboxCommands | None = None) -> Iterator[Door]:
        """The rollout's door, open for the block: its URL dies, and the session ends, after.
        With `commands`, the door runs the harness's commands too."""
        key = secrets.token_urlsafe(12)
        door = Door(
            key=key,
            token=secrets.token_urlsafe(24),
            base_url=f"{self.url}{ROUTE_PREFIX}/{key}/v1",
            session=session,
            commands=commands,
        )
        self.doors[key] = door
        try:
            yield door
        finally:
            self.doors.pop(key, None)
            session.close()

    def _door(self, request: Request, key: str) -> Door | JSONResponse:
        door = self.doors.get(key)
        if door is None:
            return _error(404, "no open rollout at this address (it has ended, or never began)", "not_found")
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not secrets.compare_digest(token.encode(), door.token.encode()):
            return _error(401, "this rollout's token is required (Authorization: Bearer ...)", "unauthorized")
        return door

    def _build_app(self) -> FastAPI:
        app = FastAPI(
            title="prorl harness recording endpoint", docs_url=None, redoc_url=None, openapi_url=None
        )

        @app.get(ROUTE_PREFIX + "/{key}/v1/models")
        async def models(key: str, request: Request) -> Response:
            door = self._door(request, key)
            if isinstance(door, JSONResponse):
                return door
            name = door.session.llm.model or "policy"
            return JSONResponse(
                {"object": "list", "data": [{"id": name, "object": "model", "owned_by": "prorl"}]}
            )

        @app.post(ROUTE_PREFIX + "/{key}/v1/chat/completions")
        async def chat_completions(key: str, request: Request) -> Response:
            door = self._door(request, key)
            if isinstance(door, JSONResponse):
                return door
            try:
                body = await request.json()
                call = ChatRequest.model_validate(body)
            except (ValueError, ValidationError) as exc:
                return _error(400, f"not a chat-completions request: {exc}", "invalid_request_error")
            async with door.lock:
                try:
                    with listening_as(door.slot_wait_listeners):
                        reply = await door.session.complete(call)
                except BudgetExhausted as exc:
                    # 403, not 400: harnesses retry a 400 and give up on a 403.
                    return _error(403, str(exc), "budget_exhausted")
                except RecordingRefusal as exc:
                    return _error(400, str(exc), "invalid_request_error")
                except InferenceError as exc:
                    status = 502 if exc.infrastructure else 400
                    return _error(status, exc.message, type(exc).__name__)
            if call.stream:
                return StreamingResponse(_stream(reply), media_type="text/event-stream")
            return JSONResponse(reply)

        @app.post(ROUTE_PREFIX + "/{key}/commands")
        async def commands(key: str, request: Request) -> Response:
            door = self._door(request, key)
            if isinstance(door, JSONResponse):
                return door
            if door.commands is None:
                return _error(404, "this rollout runs no commands here", "not_found")
            try:
                body = CommandRequest.model_validate(await request.json())
            except (ValueError, ValidationError) as exc:
                return _error(400, f"not a command request: {exc}", "invalid_request_error")
            try:
                result = await door.commands.arun(body.command, cwd=body.cwd, timeout_s=body.timeout_s)
            except CommandsClosed as exc:
                return _error(403, str(exc), "budget_exhausted")
            return JSONResponse(result.model_dump(mode="json"))

        return app


@contextlib.asynccontextmanager
async def recording_endpoint(host: str = "127.0.0.1") -> AsyncIterator[RecordingEndpoint]:
    """A started endpoint for the block."""
    endpoint = RecordingEndpoint(host)
    async with endpoint:
        yield endpoint
