# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The error a rollout API client raises for an HTTP error answer, shared by the job client
(`client`) and its DAPO-batch methods (`batches_client`) so that neither imports the other."""

from __future__ import annotations

import httpx


class RolloutAPIError(RuntimeError):
    def __init__(self, status: int, code: str, reason: str) -> None:
        super().__init__(f"HTTP {status} {code}: {reason}")
        self.status, self.code, self.reason = status, code, reason


def api_error(response: httpx.Response) -> RolloutAPIError:
    """The error an answer with status >= 400 stands for (its `error` and `reason` fields)."""
    try:
        body = response.json()
        code, reason = str(body.get("error", "error")), str(body.get("reason", body))
    except (ValueError, AttributeError):
        code, reason = "error", response.text[:500]
    return RolloutAPIError(response.status_code, code, reason)
