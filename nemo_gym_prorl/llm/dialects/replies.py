# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Reading a server's reply into a `Generation`, shared by every dialect: the checks a reply
must pass (token ids, log-probs, finish reason, text) and the retry with a smaller
`max_tokens` when the server's context window is smaller than the request assumed."""

from __future__ import annotations

import math
import re
from typing import Any

from nemo_gym_prorl.llm.dialects.base import Generation, TurnContext
from nemo_gym_prorl.llm.errors import ContextLengthExceededError
from nemo_gym_prorl.llm.records import FinishReason

_FINISH: dict[str, FinishReason] = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "abort": "abort",
}
_CONTEXT_NUMBERS = re.compile(r"maximum context length is (\d+) tokens.*?(\d+) input tokens", re.S | re.I)


def finish_reason(value: Any) -> FinishReason:
    if value not in _FINISH:
        raise ValueError(f"unknown finish_reason {value!r}")
    return _FINISH[value]


def room_from_context_error(error: ContextLengthExceededError) -> int | None:
    """From vLLM's "maximum context length is N tokens ... M input tokens" message: how many
    tokens are left for generation (None if the message does not say, or nothing is left)."""
    match = _CONTEXT_NUMBERS.search(error.body or error.message)
    if match is None:
        return None
    room = int(match.group(1)) - int(match.group(2))
    return room if room > 0 else None


# Checked once per reply over thousands of values, on the event loop: `map` and `set` in C,
# not a generator in Python (a reply's log-probs took 5 ms per 4,000 that way). `type(v) is int`
# refuses bool, as JSON's true would otherwise pass for 1.
_INT = frozenset({int})
_NUMBER = frozenset({int, float})


def check_token_ids(value: Any, what: str) -> list[int]:
    if not isinstance(value, list) or not set(map(type, value)) <= _INT:
        raise ValueError(f"{what} must be a list of integers")
    return value


def check_log_probs(value: Any, what: str) -> list[float]:
    if not isinstance(value, list) or not set(map(type, value)) <= _NUMBER:
        raise ValueError(f"{what} must be a list of numbers")
    out = list(map(float, value))
    if not all(map(math.isfinite, out)):
        raise ValueError(f"{what} contains NaN or infinite values")
    return out


def checked_generation(
    prompt: list[int],
    ids: list[int],
    log_probs: list[float],
    choice: dict[str, Any],
    text: Any,
    text_error: str,
    **extra: Any,
) -> Generation:
    """A reply's generation once its parts agree: one log-prob per token id, and text (else
    `text_error`). `extra` are the dialect's own fields of `Generation`."""
    if len(ids) != len(log_probs):
        raise ValueError(f"{len(ids)} token ids but {len(log_probs)} log-probs")
    if not isinstance(text, str):
        raise ValueError(text_error)
    return Generation(
        prompt_token_ids=prompt,
        generation_token_ids=ids,
        generation_log_probs=log_probs,
        finish_reason=finish_reason(choice.get("finish_reason")),
        text=text,
        **extra,
    )


async def post_generation(
    ctx: TurnContext,
    path: str,
    body: dict[str, Any],
    parse: Any,
    prompt: list[int],
    max_model_len: int | None,
) -> Generation:
    """POST one generation request through the pool. When the server says the window is too
    small (max_model_len was unknown, or the server counts differently): if the prompt fits and
    only `max_tokens` did not, ask again for what is left; else the window is full (exhausted)."""
    try:
        generation, reply = await ctx.pool.post_json(path, body, route=ctx.route, parse=parse)
    except ContextLengthExceededError as exc:
        room = room_from_context_error(exc)
        if room is None or room >= body["max_tokens"]:
            return Generation.exhausted(prompt, max_model_len)
        body["max_tokens"] = room
        try:
            generation, reply = await ctx.pool.post_json(path, body, route=ctx.route, parse=parse)
        except ContextLengthExceededError:
            return Generation.exhausted(prompt, max_model_len)
    generation.backend = reply.backend
    return generation
