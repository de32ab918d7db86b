# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Dialect `nemo_rl`: `/v1/chat/completions` as NeMo RL's policy server wants it.

NeMo RL's per-rank vLLM HTTP server (`policy_base_url`) accepts only requests whose sampling
matches the trainer's: `top_p` explicit, no `top_k`, and (temperature, top_p) equal to the
training or validation pair; `logprobs: true, top_logprobs: 0` makes each choice carry
`message.prompt_token_ids`, `generation_token_ids` and `generation_log_probs`. History stays
exact because every earlier assistant message is sent with its `prompt_token_ids` and
`generation_token_ids`: the server splices those ids in place of the re-templated history.

The same request works against a plain vLLM server (it ignores the extra message fields and
answers with `prompt_token_ids` / `choices[].token_ids` when asked with `return_token_ids`);
there history is re-templated from text, so the session's contiguity check is what guards it.
"""

from __future__ import annotations

from typing import Any, ClassVar

from nemo_gym_prorl.llm.dialects.base import Dialect, Generation, TurnContext
from nemo_gym_prorl.llm.dialects.replies import (
    check_log_probs,
    check_token_ids,
    checked_generation,
    post_generation,
)
from nemo_gym_prorl.llm.toolcalls import ToolCallFormat


def _token_id(value: Any) -> int:
    # With return_tokens_as_token_ids vLLM writes tokens as "token_id:123".
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.startswith("token_id:"):
        return int(value.removeprefix("token_id:"))
    raise ValueError(f"cannot read a token id from {value!r}")


def parse_chat_generation(data: Any) -> Generation:
    """Read one chat completion in NeMo RL's shape, or vLLM's `return_token_ids` shape."""
    choices = data["choices"]
    if len(choices) != 1:
        raise ValueError(f"expected exactly one choice, got {len(choices)}")
    choice = choices[0]
    message = choice["message"]
    if "generation_token_ids" in message:  # NeMo RL
        prompt = check_token_ids(message["prompt_token_ids"], "message.prompt_token_ids")
        ids = check_token_ids(message["generation_token_ids"], "message.generation_token_ids")
        log_probs = check_log_probs(message["generation_log_probs"], "message.generation_log_probs")
    else:  # vLLM
        prompt = check_token_ids(
            data.get("prompt_token_ids") or choice.get("prompt_token_ids"), "prompt_token_ids"
        )
        content = (choice.get("logprobs") or {}).get("content")
        if content is None:
            raise ValueError("no token fields: neither message.generation_token_ids nor choices[0].logprobs")
        log_probs = check_log_probs([item["logprob"] for item in content], "logprobs.content[].logprob")
        raw_ids = choice.get("token_ids")
        ids = (
            check_token_ids(raw_ids, "choices[0].token_ids")
            if raw_ids is not None
            else [_token_id(item["token"]) for item in content]
        )
    tool_calls = message.get("tool_calls") or None
    if tool_calls is not None and not isinstance(tool_calls, list):
        raise ValueError("message.tool_calls must be a list")
    text = message.get("content") or ""
    return checked_generation(
        prompt, ids, log_probs, choice, text, "message.content must be a string", server_tool_calls=tool_calls
    )


class NemoRLChatDialect(Dialect):
    """Token-exact multi-turn chat against NeMo RL's policy server (or plain vLLM)."""

    name: ClassVar[str] = "nemo_rl"

    def __init__(
        self,
        *,
        request_token_ids: bool = True,
        extra_body: dict[str, Any] | None = None,
        tool_call_format: ToolCallFormat = "hermes",
    ) -> None:
        # request_token_ids adds `return_token_ids: true` so plain vLLM returns the ids too;
        # NeMo RL's server (a vLLM server underneath) accepts the field.
        self.request_token_ids = request_token_ids
        self.extra_body = dict(extra_body or {})
        self.tool_call_format = tool_call_format

    def build_request(self, ctx: TurnContext, max_tokens: int) -> dict[str, Any]:
        """The request body. Assistant messages in `ctx.messages` already carry their
        `prompt_token_ids` / `generation_token_ids` / `generation_log_probs`."""
        body: dict[str, Any] = {
            **self.extra_body,
            "model": ctx.model,
            "messages": [*ctx.messages, *ctx.new_messages],
            "temperature": ctx.sampling.temperature,
            "top_p": ctx.sampling.top_p,  # always explicit: the policy server rejects it missing
            "max_tokens": max_tokens,
            "logprobs": True,
            "top_logprobs": 0,
        }
        body.pop("top_k", None)  # the policy server refuses any top_k but the default
        if ctx.tools:
            body["tools"] = ctx.tools
        if self.request_token_ids:
            body["return_token_ids"] = True
        if ctx.sampling.seed is not None:
            body["seed"] = ctx.sampling.seed
        return body

    async def generate(self, ctx: TurnContext) -> Generation:
        if ctx.max_model_len is not None and len(ctx.history_ids) >= ctx.max_model_len:
            return Generation.exhausted(ctx.history_ids, ctx.max_model_len)
        body = self.build_request(ctx, ctx.sampling.max_tokens)
        return await post_generation(
            ctx, "/v1/chat/completions", body, parse_chat_generation, ctx.history_ids, ctx.max_model_len
        )
