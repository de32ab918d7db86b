# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""Dialect `vllm`: token-id prompts to `/v1/completions`, deltas through `/tokenize`.

The prompt of turn k is the exact token history (previous prompt + sampled ids) followed by
the tokens the model's own chat template writes for the new messages. Those are found as a
suffix, never by re-tokenizing history:

  anchor   = a fixed tiny conversation ending with an assistant message
  A        = tokenize(anchor)                                (no generation prompt)
  B        = tokenize(anchor + new messages, generation prompt)
  delta    = B[len(A):]   after checking B starts with A

The history ends with whatever the model sampled (usually the end-of-turn token), while the
template also closes an assistant message with some text after it (ChatML: "<|im_end|>\\n").
That closing sequence is measured once per (model, tools) from the anchor, and the part the
model did not sample is bridged in. Works for any template vLLM has; a template that does not
render new messages as a pure suffix is detected and reported (`TemplateDeltaError`).
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from pydantic import BaseModel

from nemo_gym_prorl.llm.dialects.base import Dialect, Generation, TurnContext
from nemo_gym_prorl.llm.dialects.replies import (
    check_log_probs,
    check_token_ids,
    checked_generation,
    post_generation,
)
from nemo_gym_prorl.llm.dialects.structured import ConstrainedToolCalls, structural_tag
from nemo_gym_prorl.llm.errors import TemplateDeltaError
from nemo_gym_prorl.llm.toolcalls import ToolCallFormat

# The anchor: neutral content that tokenizes the same in any context for common tokenizers.
_ANCHOR_USER = {"role": "user", "content": "Hello."}
_ANCHOR_ASSISTANT_TEXT = "Hi."


class TemplateProbe(BaseModel):
    """What the chat template writes around an assistant message, for one tool list."""

    anchor: list[dict[str, Any]]
    anchor_ids: list[int]
    close_ids: list[int]  # the template's tokens after an assistant message's content


class _TokenizeResult(BaseModel):
    tokens: list[int]
    max_model_len: int | None = None


def _parse_tokenize(data: Any) -> _TokenizeResult:
    result = _TokenizeResult.model_validate(data)
    check_token_ids(result.tokens, "tokenize.tokens")
    return result


def bridge_ids(last_generation: list[int], close_ids: list[int]) -> list[int]:
    """The part of the template's closing sequence the model did not sample itself.

    The model usually stops by sampling the end-of-turn token (close[0]); a generation cut by
    max_tokens sampled none of it. The longest k with generation ending in close[:k] wins."""
    for k in range(min(len(close_ids), len(last_generation)), 0, -1):
        if last_generation[-k:] == close_ids[:k]:
            return close_ids[k:]
    return list(close_ids)


class VLLMCompletionsDialect(Dialect):
    """Token-in/token-out against vLLM's OpenAI server (any model with a chat template)."""

    name: ClassVar[str] = "vllm"

    def __init__(
        self,
        *,
        extra_body: dict[str, Any] | None = None,
        tool_call_format: ToolCallFormat = "hermes",
        constrained: ConstrainedToolCalls | None = None,
    ) -> None:
        # extra_body: additional sampling fields vLLM accepts (e.g. top_k, repetition_penalty).
        # constrained: force well-formed tool calls with a structural tag (see `structured`).
        self.extra_body = dict(extra_body or {})
        self.tool_call_format = tool_call_format
        self.constrained = constrained if constrained is not None and constrained.enabled else None
        if self.constrained is not None and self.constrained.tool_format != tool_call_format:
            raise ValueError(
                f"constrained tool calls in {self.constrained.tool_format!r} format would not be read by "
                f"the {tool_call_format!r} parser; set both to the same format"
            )
        self._probes: dict[tuple[str, str], TemplateProbe] = {}

    # --- prompt construction ------------------------------------------------------------------

    async def _tokenize_chat(
        self, ctx: TurnContext, messages: list[dict[str, Any]], *, add_generation_prompt: bool
    ) -> _TokenizeResult:
        body: dict[str, Any] = {
            "model": ctx.model,
            "messages": messages,
            "add_generation_prompt": add_generation_prompt,
            "add_special_tokens": False,  # the chat template writes its own BOS if it has one
        }
        if ctx.tools:
            body["tools"] = ctx.tools
        result, _ = await ctx.pool.post_json("/tokenize", body, route=ctx.route, parse=_parse_tokenize)
        return result

    async def template_probe(self, ctx: TurnContext) -> TemplateProbe:
        """Measure (once per model and tool list) the anchor's ids and the closing sequence."""
        cache_key = (ctx.model, json.dumps(ctx.tools, sort_keys=True) if ctx.tools else "")
        cached = self._probes.get(cache_key)
        if cached is not None:
            return cached
        assistant = {"role": "assistant", "content": _ANCHOR_ASSISTANT_TEXT}
        anchor = [_ANCHOR_USER, assistant]
        with_prompt = (await self._tokenize_chat(ctx, [_ANCHOR_USER], add_generation_prompt=True)).tokens
        anchor_ids = (await self._tokenize_chat(ctx, anchor, add_generation_prompt=False)).tokens
        content, _ = await ctx.pool.post_json(
            "/tokenize",
            {"model": ctx.model, "prompt": _ANCHOR_ASSISTANT_TEXT, "add_special_tokens": False},
            route=ctx.route,
            parse=_parse_tokenize,
        )
        if anchor_ids[: len(with_prompt)] != with_prompt:
            raise TemplateDeltaError(
                "the chat template renders the conversation before an assistant message differently "
                "once the message exists (e.g. it rewrites earlier turns); exact token continuation "
                "is impossible with this template"
            )
        body = anchor_ids[len(with_prompt) :]
        if body[: len(content.tokens)] != content.tokens:
            raise TemplateDeltaError(
                "the chat template does not write assistant content verbatim after the generation "
                f"prompt (content ids {content.tokens}, rendered {body})"
            )
        probe = TemplateProbe(anchor=anchor, anchor_ids=anchor_ids, close_ids=body[len(content.tokens) :])
        self._probes[cache_key] = probe
        return probe

    async def render(self, ctx: TurnContext, messages: list[dict[str, Any]]) -> list[int]:
        """`messages` as the chat template renders them, with the generation prompt: the ids a
        client's whole conversation becomes on the backend."""
        return (await self._tokenize_chat(ctx, messages, add_generation_prompt=True)).tokens

    async def next_prompt(self, ctx: TurnContext) -> tuple[list[int], int | None]:
        """The exact prompt ids for this turn, and the server's max_model_len if it said."""
        if ctx.rendered_ids is not None:
            return ctx.rendered_ids, None
        if not ctx.history_ids:
            first = await self._tokenize_chat(ctx, ctx.new_messages, add_generation_prompt=True)
            return first.tokens, first.max_model_len
        probe = await self.template_probe(ctx)
        rendered = await self._tokenize_chat(
            ctx, [*probe.anchor, *ctx.new_messages], add_generation_prompt=True
        )
        if rendered.tokens[: len(probe.anchor_ids)] != probe.anchor_ids:
            raise TemplateDeltaError(
                "the chat template renders earlier messages differently once new messages follow; "
                "the new messages cannot be appended as a token suffix"
            )
        delta = rendered.tokens[len(probe.anchor_ids) :]
        bridge = bridge_ids(ctx.last_generation_ids, probe.close_ids)
        return [*ctx.history_ids, *bridge, *delta], rendered.max_model_len

    # --- generation ---------------------------------------------------------------------------

    async def generate(self, ctx: TurnContext) -> Generation:
        prompt, server_max_len = await self.next_prompt(ctx)
        max_model_len = ctx.max_model_len or server_max_len
        max_tokens = ctx.sampling.max_tokens
        if max_model_len is not None:
            room = max_model_len - len(prompt)
            if room <= 0:
                return Generation.exhausted(prompt, max_model_len)
            max_tokens = min(max_tokens, room)
        body: dict[str, Any] = {
            **self.extra_body,
            "model": ctx.model,
            "prompt": prompt,
            "max_tokens": max_tokens,
            "temperature": ctx.sampling.temperature,
            "top_p": ctx.sampling.top_p,
            "logprobs": 0,  # the sampled token's log-prob only
            "return_token_ids": True,
            "echo": False,
        }
        if ctx.sampling.seed is not None:
            body["seed"] = ctx.sampling.seed
        built = (
            structural_tag(self.constrained, ctx.constraint, ctx.turn)
            if self.constrained is not None and ctx.constraint is not None
            else None
        )
        if built is not None:
            body["structured_outputs"] = {"structural_tag": json.dumps(built[0])}

        def parse(data: Any) -> Generation:
            choice = data["choices"][0]
            ids = check_token_ids(choice["token_ids"], "choices[0].token_ids")
            log_probs = check_log_probs(
                (choice.get("logprobs") or {}).get("token_logprobs"), "token_logprobs"
            )
            echoed = choice.get("prompt_token_ids") or data.get("prompt_token_ids")
            if echoed is not None and list(echoed) != prompt:
                raise ValueError("the server's prompt_token_ids differ from the prompt sent")
            decoding = built[1] if built is not None else None
            return checked_generation(
                prompt, ids, log_probs, choice, choice.get("text"), "choices[0].text is missing",
                max_model_len=max_model_len, decoding=decoding,
            )  # fmt: skip

        return await post_generation(ctx, "/v1/completions", body, parse, prompt, max_model_len)
