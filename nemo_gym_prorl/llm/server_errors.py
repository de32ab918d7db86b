# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Which HTTP 5xx answers are the request's fault, not the backend's.

NeMo RL's policy server (`vllm_worker_async.py`, `/v1/chat/completions`) asserts that `top_k` is
unset or -1, that `top_p` is explicit, and that (temperature, top_p) is the training or the
validation pair. A failed assertion is an unhandled exception: HTTP 500, on every rank alike. So
such a 500 says nothing about the backend's health: retrying it elsewhere only spreads the same
refusal and counts it against healthy ranks. A 500 naming one of those assertions is a refusal
of the request; an opaque 500 that a second backend repeats for the same request is treated the
same way (the body is often just "Internal Server Error").
"""

from __future__ import annotations

import re

SAMPLING_REFUSAL = re.compile(
    r"matches neither the train sampling params|Top k sampling parameter must be unset|"
    r"top_p must be set explicitly",
    re.IGNORECASE,
)
# Distinct backends answering 500 to one request before the request, not the backends, is blamed.
SAME_500_LIMIT = 2


def is_request_refusal(status: int, body: str) -> bool:
    """A 5xx whose body names a sampling-parameter assertion of NeMo RL's policy server."""
    return status >= 500 and bool(SAMPLING_REFUSAL.search(body or ""))
