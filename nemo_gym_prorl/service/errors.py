# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Every failure the API reports, as one JSON shape: `{"error": code, "reason": text}`."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from nemo_gym_prorl.pipeline import (
    DuplicateJobError,
    JobNotFoundError,
    PipelineClosedError,
    QueueFullError,
    UnknownTaskError,
)
from nemo_gym_prorl.service.backends import BackendError, BackendNotFoundError


class ApiError(Exception):
    def __init__(self, status: int, code: str, reason: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(reason)
        self.status, self.code, self.reason, self.headers = status, code, reason, headers


def error_response(status: int, code: str, reason: str, **extra: Any) -> JSONResponse:
    headers = extra.pop("headers", None)
    return JSONResponse({"error": code, "reason": reason, **extra}, status_code=status, headers=headers)


def _loc(parts: tuple[Any, ...] | list[Any]) -> str:
    return ".".join(str(p) for p in parts)


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def _api(_: Request, exc: ApiError) -> JSONResponse:
        return error_response(exc.status, exc.code, exc.reason, headers=exc.headers)

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

    @app.exception_handler(UnknownTaskError)
    async def _unknown_task(_: Request, exc: UnknownTaskError) -> JSONResponse:
        return error_response(400, "unknown_task", str(exc))

    @app.exception_handler(DuplicateJobError)
    async def _dup(_: Request, exc: DuplicateJobError) -> JSONResponse:
        return error_response(409, "duplicate_id", str(exc))

    @app.exception_handler(QueueFullError)
    async def _full(_: Request, exc: QueueFullError) -> JSONResponse:
        return error_response(429, "queue_full", str(exc), headers={"Retry-After": "1"})

    @app.exception_handler(JobNotFoundError)
    async def _missing(_: Request, exc: JobNotFoundError) -> JSONResponse:
        return error_response(
            410 if exc.evicted else 404, "evicted" if exc.evicted else "unknown_job", str(exc)
        )

    @app.exception_handler(PipelineClosedError)
    async def _closed(_: Request, exc: PipelineClosedError) -> JSONResponse:
        return error_response(503, "shutting_down", str(exc))

    @app.exception_handler(BackendError)
    async def _bad_backend(_: Request, exc: BackendError) -> JSONResponse:
        return error_response(400, "bad_backend", str(exc))

    @app.exception_handler(BackendNotFoundError)
    async def _no_backend(_: Request, exc: BackendNotFoundError) -> JSONResponse:
        return error_response(404, "unknown_backend", str(exc))


def _error_doc(description: str) -> dict[str, Any]:
    from nemo_gym_prorl.service.models import ErrorBody

    return {"model": ErrorBody, "description": description}


# Documented on every route, so the OpenAPI schema tells clients the error shape.
ErrorBodyDoc: dict[int | str, dict[str, Any]] = {
    400: _error_doc("Bad request (unknown task, bad backend address)"),
    401: _error_doc("Missing or wrong bearer token"),
    404: _error_doc("Unknown job or backend"),
    409: _error_doc("Job id already in use"),
    410: _error_doc("Result evicted by the retention cap"),
    422: _error_doc("Malformed request"),
    429: _error_doc("Queue full; retry later"),
    503: _error_doc("Not running, no LLM backend, or shutting down"),
    504: _error_doc("The rollout did not finish in time (cancelled)"),
}
