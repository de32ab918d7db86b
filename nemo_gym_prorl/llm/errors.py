# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Typed errors of the inference layer.

Every error says whether it is the serving side's fault (`infrastructure=True`: the sample
should be masked and the rollout may be retried) or the data's fault (a request the model
server rightly rejected). Callers branch on the type, never on message text.
"""

from __future__ import annotations


class InferenceError(Exception):
    """Base class for everything the inference layer raises on purpose."""

    infrastructure: bool = True

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


# --- the balancer could not hand out an endpoint ---------------------------------------------


class NoBackendError(InferenceError):
    """The pool has no endpoint at all (nothing configured, or everything removed)."""


class AllBackendsDownError(InferenceError):
    """Endpoints exist but none is healthy and accepting work."""


class PoolSaturatedError(InferenceError):
    """Every usable endpoint stayed at its concurrency cap for the whole acquire timeout."""


class PoolClosedError(InferenceError):
    """The pool was closed while a caller was waiting on it."""


# --- one HTTP exchange with one backend failed ----------------------------------------------


class BackendError(InferenceError):
    """A request to one backend failed. `retryable` says whether another attempt may succeed."""

    retryable: bool = True

    def __init__(self, message: str, *, backend: str, status: int | None = None, body: str = "") -> None:
        super().__init__(message)
        self.backend = backend
        self.status = status
        self.body = body


class BackendUnavailableError(BackendError):
    """Connection refused or dropped: the backend process is gone or restarting."""


class BackendTimeoutError(BackendError):
    """The backend did not answer within the request timeout."""


class BackendServerError(BackendError):
    """The backend answered 5xx."""


class BackendProtocolError(BackendError):
    """The backend answered 2xx with a body that is not what the protocol promises
    (not JSON, missing token ids, NaN log-probs...)."""


class BackendRejectedError(BackendError):
    """The backend answered 4xx: the request itself is wrong, so retrying cannot help."""

    retryable = False
    infrastructure = False


class ContextLengthExceededError(BackendRejectedError):
    """The prompt (plus the requested tokens) does not fit the model's context window.
    Sessions turn this into a turn that ends with finish reason `length`, not a failure."""


class RetriesExhaustedError(InferenceError):
    """All attempts of one logical request failed; `errors` holds each attempt's error."""

    def __init__(self, message: str, errors: list[BackendError]) -> None:
        super().__init__(message)
        self.errors = errors


# --- token-in/token-out invariants -----------------------------------------------------------


class TemplateDeltaError(InferenceError):
    """The chat template does not render new messages as a pure suffix, so the exact token
    history cannot be extended without re-tokenizing it. This is a property of the model's
    template, found on the first turn that needs a delta."""


class NonContiguousError(InferenceError):
    """A backend returned a prompt that does not start with the trajectory's token history.
    Training on it would break NeMo RL's contiguity assertion, so the trajectory stops."""
