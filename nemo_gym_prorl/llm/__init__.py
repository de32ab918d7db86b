# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The inference layer: a balanced backend pool, token-in/token-out sessions, model dialects,
and the embedded vLLM-CPU default backend (`nemo_gym_prorl.llm.embedded`)."""

from nemo_gym_prorl.llm.balancer import Balancer, BalancerConfig, BalancerStats, Lease
from nemo_gym_prorl.llm.dialects import Dialect, NemoRLChatDialect, VLLMCompletionsDialect, make_dialect
from nemo_gym_prorl.llm.errors import (
    AllBackendsDownError,
    BackendError,
    BackendRejectedError,
    ContextLengthExceededError,
    InferenceError,
    NoBackendError,
    NonContiguousError,
    PoolSaturatedError,
    RetriesExhaustedError,
    TemplateDeltaError,
)
from nemo_gym_prorl.llm.pool import LLMBackendPool, PoolConfig, Reroute, Route, normalize_base_url
from nemo_gym_prorl.llm.records import (
    ChatMessage,
    SamplingParams,
    ToolCall,
    ToolCallError,
    TrajectoryFailure,
    TrajectoryTokens,
    TurnRecord,
)
from nemo_gym_prorl.llm.tito import SessionClosedError, TokenSession
from nemo_gym_prorl.llm.toolcalls import parse_hermes, parse_server_tool_calls

__all__ = [
    "AllBackendsDownError",
    "BackendError",
    "BackendRejectedError",
    "Balancer",
    "BalancerConfig",
    "BalancerStats",
    "ChatMessage",
    "ContextLengthExceededError",
    "Dialect",
    "InferenceError",
    "LLMBackendPool",
    "Lease",
    "NemoRLChatDialect",
    "NoBackendError",
    "NonContiguousError",
    "PoolConfig",
    "PoolSaturatedError",
    "Reroute",
    "RetriesExhaustedError",
    "Route",
    "SamplingParams",
    "SessionClosedError",
    "TemplateDeltaError",
    "TokenSession",
    "ToolCall",
    "ToolCallError",
    "TrajectoryFailure",
    "TrajectoryTokens",
    "TurnRecord",
    "VLLMCompletionsDialect",
    "make_dialect",
    "normalize_base_url",
    "parse_hermes",
    "parse_server_tool_calls",
]
