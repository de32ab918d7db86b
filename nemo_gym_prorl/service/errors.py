# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Every failure the API reports, as one JSON shape: `{"error": code, "reason": text}`, naming no
path of the server (`redact_server_paths`: the log keeps them, the answer does not)."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.datastructures import MutableHeaders
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from nemo_gym_prorl.agent.handler import ToolServiceUnavailableError
from nemo_gym_prorl.llm.policy import PolicyLoadError, PolicyVersionError
from nemo_gym_prorl.pipeline import (
    DuplicateJobError,
    InvalidInstanceError,
    JobNotFoundError,
    JobResult,
    JobState,
    PipelineClosedError,
    QueueFullError,
    UnknownTaskError,
)
from nemo_gym_prorl.pipeline.handler import INVALID_INSTANCE
from nemo_gym_prorl.server_paths import redact_server_paths, redact_strings
from nemo_gym_prorl.service.backends import BackendError, BackendNotFoundError
from nemo_gym_prorl.service.journal import JournalError


class ApiError(Exception):
    def __init__(self, status: int, code: str, reason: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(reason)
        self.status, self.code, self.reason, self.headers = status, code, reason, headers


def error_response(status: int, code: str, reason: str, **extra: Any) -> JSONResponse:
    """The one place an error becomes an answer: whatever the message quotes (an exception's
    text, a file the server read), the body names no server path."""
    headers = extra.pop("headers", None)
    body = {"error": code, "reason": redact_server_paths(reason), **redact_strings(extra)}
    return JSONResponse(body, status_code=status, headers=headers)


class RedactErrorBodies:
    """ASGI middleware for an app whose error answers this module does not build: a body of an
    HTTP error status names no server path. NeMo Gym's servers answer an unhandled exception with
    its `repr` (paths and all); the answer is held, redacted and sent whole. Success answers,
    streams included, pass untouched."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start: Message | None = None
        body: list[bytes] = []

        async def redacting_send(message: Message) -> None:
            nonlocal start
            if message["type"] == "http.response.start" and message["status"] >= 400:
                start = message
                return
            if start is None or message["type"] != "http.response.body":
                await send(message)
                return
            body.append(message.get("body", b""))
            if message.get("more_body", False):
                return
            text = redact_server_paths(b"".join(body).decode("utf-8", errors="replace")).encode()
            headers = MutableHeaders(scope=start)
            headers["content-length"] = str(len(text))
            await send(start)
            await send({"type": "http.response.body", "body": text})

        await self.app(scope, receive, redacting_send)


def _loc(parts: tuple[Any, ...] | list[Any]) -> str:
    return ".".join(str(p) for p in parts)


# The one table from the stack's errors to HTTP answers, whichever door (`prorl serve`, the NeMo
# Gym agent's rollout API or its `/run`): (status, code, headers). A full queue is a temporary
# overload of this server, not a fault of the client: 503 with `Retry-After`, everywhere.
RETRY_AFTER = {"Retry-After": "1"}
ERRORS: dict[type[Exception], tuple[int, str, dict[str, str] | None]] = {
    UnknownTaskError: (400, "unknown_task", None),
    InvalidInstanceError: (400, INVALID_INSTANCE, None),
    BackendError: (400, "bad_backend", None),
    BackendNotFoundError: (404, "unknown_backend", None),
    DuplicateJobError: (409, "duplicate_id", None),
    QueueFullError: (503, "queue_full", RETRY_AFTER),
    PipelineClosedError: (503, "shutting_down", None),
    # What checks a row at submit where its tools live (a Gym resources server) could not be
    # reached: the row is neither accepted unchecked nor refused. Answered as a rollout that met
    # the same server down at INIT is (same code, so trainers and Gym classify it alike), plus
    # `Retry-After`: nothing was started, asking again is all there is to do.
    ToolServiceUnavailableError: (503, "infrastructure_failure", RETRY_AFTER),
    # A publish the backends cannot carry out (a bad adapter path, no backend up, full weights)
    # is refused whole and changes nothing: the caller's to fix, not a fault of this server.
    PolicyVersionError: (409, "stale_version", None),
    PolicyLoadError: (422, "policy_not_loaded", None),
    # The journal could not write an accepted job (a full disk, say): not answered as accepted,
    # since a crash would lose it; sending it again under its id writes it then.
    JournalError: (503, "journal_unavailable", RETRY_AFTER),
}


def as_api_error(exc: Exception) -> ApiError | None:
    """The HTTP answer for one of the stack's errors; None for an error the table does not know."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, JobNotFoundError):
        return ApiError(410 if exc.evicted else 404, "evicted" if exc.evicted else "unknown_job", str(exc))
    for kind, (status, code, headers) in ERRORS.items():
        if isinstance(exc, kind):
            return ApiError(status, code, str(exc), dict(headers) if headers else None)
    return None


def result_error(result: JobResult) -> ApiError | None:
    """The HTTP answer of a blocking call whose rollout did not finish (None: it did). A
    handler's classified failure keeps its own status; running out of time is 504."""
    if result.state is JobState.DONE:
        return None
    if result.failure is not None:
        code = result.failure.code or f"{result.failure.kind}_failure"
        return ApiError(result.failure.status, code, result.failure.message)
    if result.critical_error == "timeout":
        return ApiError(504, "timeout", result.error or "the rollout exceeded its time budget")
    if result.state is JobState.CANCELLED:
        return ApiError(503, "cancelled", result.cancel_reason or "cancelled")
    return ApiError(500, f"{result.critical_error or 'unknown'}_error", result.error or "rollout failed")


def install_error_handlers(app: FastAPI, *, request_errors: bool = True) -> None:
    """Answer the stack's errors from the table; with `request_errors`, also malformed requests
    and unknown paths in the same shape (a host app that has its own handlers leaves them)."""

    async def _stack_error(_: Request, exc: Exception) -> JSONResponse:
        error = as_api_error(exc)
        assert error is not None  # registered only for the table's types
        return error_response(error.status, error.code, error.reason, headers=error.headers)

    for kind in (ApiError, JobNotFoundError, *ERRORS):
        app.add_exception_handler(kind, _stack_error)
    if not request_errors:
        return

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors()
        reason = "; ".join(f"{_loc(e.get('loc', ()))}: {e.get('msg', 'invalid')}" for e in errors[:10])
        detail = [
            {"loc": list(e.get("loc", ())), "msg": str(e.get("msg")), "type": e.get("type")} for e in errors
        ]
        return error_response(422, "invalid_request", reason or "invalid request", detail=detail)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        return error_response(exc.status_code, code, str(exc.detail), headers=getattr(exc, "headers", None))


def _error_doc(description: str) -> dict[str, Any]:
    from nemo_gym_prorl.service.models import ErrorBody

    return {"model": ErrorBody, "description": description}


# Documented on every route, so the OpenAPI schema tells clients the error shape.
ErrorBodyDoc: dict[int | str, dict[str, Any]] = {
    400: _error_doc("Bad request (unknown task, an instance the task cannot run, bad backend address)"),
    401: _error_doc("Missing or wrong bearer token"),
    404: _error_doc("Unknown job or backend"),
    409: _error_doc("Job id already in use"),
    410: _error_doc("Result evicted by the retention cap"),
    422: _error_doc("Malformed request"),
    429: _error_doc("Too many batch sessions open"),
    503: _error_doc(
        "Queue full or the tools' server unreachable (with Retry-After), not running, no LLM backend, "
        "or shutting down"
    ),
    504: _error_doc("The rollout did not finish in time (cancelled)"),
}
